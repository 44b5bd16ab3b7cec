"""TLS connections that give up on a silent client, over real loopback sockets: a client that
stops in the handshake or after it is dropped as a closed connection, in about the time
given; one that talks is served as before."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tests.support.server import REPO_ROOT
from webhook.certs.directory import ensure_dev_certificates
from webhook.server.edge.stall_limited_tls import stall_limited

STALL_SECONDS = 0.3


@pytest.fixture(scope="module")
def contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    paths, _ = ensure_dev_certificates(tmp_path_factory.mktemp("certs"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(paths.cert, paths.key)
    server.sslsocket_class = stall_limited(STALL_SECONDS)
    client = ssl.create_default_context(cafile=str(paths.ca_cert))
    return server, client


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock


def serve_once(
    listener: socket.socket, context: ssl.SSLContext, then: Callable[[ssl.SSLSocket], object]
) -> dict[str, object]:
    """Accept one connection in a thread as gthread does (blocking, wrapped, handshake on
    connect), run `then` on it; what it returned or raised, and how long it took."""
    outcome: dict[str, object] = {}

    def run() -> None:
        connection, _ = listener.accept()
        connection.setblocking(True)
        started = time.monotonic()
        try:
            wrapped = context.wrap_socket(connection, server_side=True)
            wrapped.setblocking(True)
            outcome["result"] = then(wrapped)
        except Exception as error:
            outcome["error"] = error
        finally:
            outcome["seconds"] = time.monotonic() - started
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    outcome["thread"] = thread
    return outcome


def finished(outcome: dict[str, object]) -> dict[str, object]:
    thread = outcome["thread"]
    assert isinstance(thread, threading.Thread)
    thread.join(timeout=10)
    assert not thread.is_alive(), "the server side is still waiting on a silent client"
    return outcome


def test_a_client_silent_after_the_handshake_is_dropped_as_closed(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], listener: socket.socket
) -> None:
    server, client = contexts
    outcome = serve_once(listener, server, lambda tls: tls.recv(1024))
    with client.wrap_socket(
        socket.create_connection(listener.getsockname()), server_hostname="localhost"
    ):
        finished(outcome)
    error = outcome.get("error")
    assert isinstance(error, ssl.SSLEOFError) and error.args[0] == ssl.SSL_ERROR_EOF
    assert STALL_SECONDS * 0.9 <= float(outcome["seconds"]) < STALL_SECONDS + 3


def test_a_client_silent_within_the_handshake_is_dropped(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], listener: socket.socket
) -> None:
    server, _ = contexts
    outcome = serve_once(listener, server, lambda tls: tls.recv(1024))
    with socket.create_connection(listener.getsockname()) as raw:
        raw.sendall(b"\x16\x03\x01\x00")  # the start of a TLS record, and no more
        finished(outcome)
    assert isinstance(outcome.get("error"), ssl.SSLEOFError)


def test_a_client_that_talks_is_served_and_may_pause_below_the_limit(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], listener: socket.socket
) -> None:
    server, client = contexts

    def echo_twice(tls: ssl.SSLSocket) -> bytes:
        first = tls.recv(1024)
        second = tls.recv(1024)
        tls.sendall(first + second)
        return first + second

    outcome = serve_once(listener, server, echo_twice)
    with client.wrap_socket(
        socket.create_connection(listener.getsockname()), server_hostname="localhost"
    ) as tls:
        tls.sendall(b"ping ")
        time.sleep(STALL_SECONDS / 3)
        tls.sendall(b"pong")
        received = b""
        while len(received) < len(b"ping pong"):
            received += tls.recv(1024)
    finished(outcome)
    assert outcome.get("result") == b"ping pong" and received == b"ping pong"


def test_non_blocking_stays_non_blocking(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], listener: socket.socket
) -> None:
    server, client = contexts

    def timeout_when_not_blocking(tls: ssl.SSLSocket) -> object:
        tls.setblocking(False)
        return tls.gettimeout()

    outcome = serve_once(listener, server, timeout_when_not_blocking)
    with client.wrap_socket(
        socket.create_connection(listener.getsockname()), server_hostname="localhost"
    ):
        finished(outcome)
    assert outcome.get("result") == 0.0


# What the served connections are, as the gunicorn configuration picks it from the setting.
SERVING_SOCKET = """
from webhook.server import gunicorn_conf
from webhook.server.edge.stall_limited_tls import StallLimitedSSLSocket
served = gunicorn_conf._master.serving_socket
limited = issubclass(served, StallLimitedSSLSocket)
print(served.stall_seconds if limited else "off")
"""


@pytest.mark.parametrize(("setting", "served"), [(None, "10.0"), ("0", "off"), ("2.5", "2.5")])
def test_the_limit_is_a_setting_and_0_turns_it_off(setting: str | None, served: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLIENT_STALL_SECONDS"}
    if setting is not None:
        env["CLIENT_STALL_SECONDS"] = setting
    result = subprocess.run(
        [sys.executable, "-c", SERVING_SOCKET],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == served


def test_a_client_that_stops_reading_is_dropped_as_closed(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], listener: socket.socket
) -> None:
    # Far more than the socket buffers of both ends hold, so the write must wait on the client.
    answer = b"x" * (64 * 2**20)
    server, client = contexts
    outcome = serve_once(listener, server, lambda tls: tls.sendall(answer))
    with client.wrap_socket(
        socket.create_connection(listener.getsockname()), server_hostname="localhost"
    ) as tls:
        tls.recv(1)  # the handshake is done; then nothing more is read
        finished(outcome)
    error = outcome.get("error")
    assert isinstance(error, ssl.SSLEOFError) and error.args[0] == ssl.SSL_ERROR_EOF
