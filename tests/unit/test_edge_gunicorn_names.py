"""Every name of gunicorn the serving edge overrides or reads, pinned against the gunicorn that
requirements.txt pins. gunicorn is not type-checked, so a renamed internal would otherwise fail
only at run time, under load: here an upgrade fails loudly, naming what moved."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import gunicorn
import pytest
from gunicorn import sock as gunicorn_sock
from gunicorn.config import Config
from gunicorn.http import get_parser
from gunicorn.http.unreader import Unreader
from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook.server.edge.worker import KeepAliveThreadWorker

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"

# Methods of gthread's worker that the edge's worker overrides, and calls through super().
OVERRIDDEN = (
    "finish_request",
    "init_process",
    "get_thread_pool",
    "run",
    "enqueue_req",
    "murder_pending",
    "handle",
    "set_accept_enabled",
    "accept",
    "wait_for_and_dispatch_events",
)
# What the edge reads or writes of the worker's state: set by gthread's own code.
WORKER_STATE = ("nr_conns", "poller", "keepalived_conns", "tpool", "worker_connections")
# Of the base worker (gunicorn.workers.base.Worker), set in its __init__.
BASE_STATE = ("cfg", "log", "alive", "sockets", "wsgi")
# What the edge reads of gthread's connection.
CONNECTION_STATE = ("sock", "parser", "initialized", "client", "timeout", "data_ready")
CONNECTION_METHODS = ("close",)
# The reader beneath a connection's parser, whose buffer the front fills and drains.
UNREADER_METHODS = ("unread", "take_buffered")
# Module functions the front calls to finish a handshake as gthread would.
FUNCTIONS = ((gunicorn_sock, "ssl_wrap_socket"), (gunicorn_sock, "is_http2_negotiated"))


def test_the_gunicorn_installed_is_the_one_pinned() -> None:
    pinned = re.search(r"^gunicorn==(\S+)$", REQUIREMENTS.read_text(), re.MULTILINE)
    assert pinned is not None and gunicorn.__version__ == pinned.group(1)


@pytest.mark.parametrize("name", OVERRIDDEN)
def test_each_method_the_worker_overrides_is_gthreads_with_the_same_parameters(name: str) -> None:
    theirs = getattr(ThreadWorker, name, None)
    assert callable(theirs), f"gunicorn's ThreadWorker has no {name} any more"
    ours = KeepAliveThreadWorker.__dict__[name]
    assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), (
        name
    )


@pytest.mark.parametrize("name", WORKER_STATE)
def test_the_worker_state_the_edge_reads_is_set_by_gthread(name: str) -> None:
    assert re.search(rf"self\.{name}\s*=", inspect.getsource(ThreadWorker)), name


@pytest.mark.parametrize("name", BASE_STATE)
def test_the_base_worker_state_the_edge_reads_is_set_by_gunicorn(name: str) -> None:
    base = ThreadWorker.__mro__[1]
    assert re.search(rf"self\.{name}\s*=", inspect.getsource(base)), name


@pytest.mark.parametrize("name", CONNECTION_STATE)
def test_the_connection_state_the_edge_reads_is_set_by_gthread(name: str) -> None:
    assert re.search(rf"self\.{name}\s*=", inspect.getsource(TConn)), name


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        *((TConn, name) for name in CONNECTION_METHODS),
        *((Unreader, name) for name in UNREADER_METHODS),
        *FUNCTIONS,
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_the_functions_the_edge_calls_are_there(owner: object, name: str) -> None:
    assert callable(getattr(owner, name, None)), f"{owner} has no {name} any more"


def test_the_unreaders_buffer_is_where_the_front_reads_it() -> None:
    assert re.search(r"self\.buf\s*=", inspect.getsource(Unreader))
    assert list(inspect.signature(get_parser).parameters)[:1] == ["cfg"]


# gunicorn settings the edge reads off `self.cfg`.
SETTINGS_READ = ("reuse_port", "threads", "keepalive")


@pytest.mark.parametrize("name", SETTINGS_READ)
def test_the_settings_the_edge_reads_are_gunicorns(name: str) -> None:
    assert name in Config().settings


def test_a_connections_keepalive_deadline_is_on_the_monotonic_clock_the_front_uses() -> None:
    # The worker compares a kept-alive connection's timeout, less the keep-alive, with the
    # front's monotonic times (worker.py, _close_oldest_idle).
    source = inspect.getsource(TConn.set_timeout)
    assert "time.monotonic() + self.cfg.keepalive" in source


def test_the_poller_calls_each_registered_callback_with_its_file_object() -> None:
    # The front and the listeners register callbacks that gthread calls this way.
    source = inspect.getsource(ThreadWorker.wait_for_and_dispatch_events)
    assert "callback = key.data" in source and "callback(key.fileobj)" in source


def test_a_connection_is_kept_alive_when_handle_says_true() -> None:
    # The worker serves a connection's next request itself only on `True` from gthread's
    # handle, which says so through _keepalive_after (a bool) once a request is answered.
    assert "return self._keepalive_after(" in inspect.getsource(ThreadWorker.handle)
    assert "return bool(" in inspect.getsource(ThreadWorker._keepalive_after)


def test_the_parser_and_the_tls_wrap_take_what_the_front_gives_them() -> None:
    assert list(inspect.signature(get_parser).parameters)[:3] == ["cfg", "source", "source_addr"]
    assert list(inspect.signature(gunicorn_sock.ssl_wrap_socket).parameters) == ["sock", "conf"]
    assert re.search(r"self\.unreader\s*=", inspect.getsource(TConn.init) + _parser_source())


def _parser_source() -> str:
    from gunicorn.http.parser import Parser

    return inspect.getsource(Parser)
