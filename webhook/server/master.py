"""The gunicorn master's jobs, and the serving edge's settings, for gunicorn_conf.py to wire.

Everything comes from the same Settings the application reads. The master checks the policies
and the certificate files before it forks, so a bad policy stops startup with a message that
names the file, the line and the field, instead of a worker that fails to boot.

The master also prepares the state directory its workers share: the last good policy set, which
a worker that boots while the policy directory does not load serves instead, and the files in
which every worker keeps its Prometheus metrics. Workers reload the policies themselves, since
threads do not survive a fork. The master's one thread is the metrics port's event loop
(METRICS_BIND): started before the workers fork, it never runs in them, nor do they use its
listener.

Every log line, gunicorn's and the service's, is written as LOG_FORMAT says (log_format.py):
a JSON object per line by default. There is no access log: the service writes one line per
admission itself, with what the apiserver asked and what it was answered (log_lines.py).

Each worker builds its TLS context once, and again only when the certificate files change
(edge/tls_context.py): gunicorn's own hook builds one, CA store included, for every connection.
The master loads the pair once before it forks, so a pair that does not load stops startup. Its
connections drop a client that stays silent within a handshake or a request for
CLIENT_STALL_SECONDS (edge/stall_limited_tls.py), which would otherwise hold a thread for good.
Workers are the edge's (edge/worker.py): gthread workers that serve a kept-alive connection's
next request on the same thread, and share the apiserver's few kept-alive connections out
evenly.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from gunicorn import glogging
from gunicorn import sock as gunicorn_sock

from webhook import __version__
from webhook.bind_address import parse_bind
from webhook.policy.snapshot import LastGood
from webhook.policy.store import load_settled_directory
from webhook.server.admission_log import admission_lines
from webhook.server.edge.connection_table import ConnectionTable
from webhook.server.edge.stall_limited_tls import stall_limited
from webhook.server.edge.tls_context import TLSContextCache
from webhook.server.log_format import formatter_for
from webhook.server.settings import Settings, SettingsError
from webhook.server.worker_status import every_worker, forget_worker

STATE_DIR_VARIABLE = "STATE_DIR"
METRICS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
# The edge's worker, and gunicorn's stock ones the benchmark measures it against (WORKER).
WORKER_CLASSES = {
    "keepalive": "webhook.server.edge.worker.KeepAliveThreadWorker",
    "gthread": "gthread",
    "gevent": "gevent",
}


def settings_or_exit() -> Settings:
    try:
        return Settings.from_environ()
    except SettingsError as error:
        sys.exit(f"webhook: {error}")


class Master:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # State directories this master created, and so removes when it exits.
        self._created_state_dirs: list[Path] = []
        # Filled in the master, which checks that the pair loads; each worker starts from its
        # copy.
        self._tls_contexts = TLSContextCache()
        # Made here, in the master before it forks, so that all its workers share it.
        self._connection_table = ConnectionTable()
        stall = settings.client_stall_seconds
        self.serving_socket = stall_limited(stall, ssl.SSLSocket) if stall else ssl.SSLSocket
        # gevent's worker wraps connections in gevent's own SSL sockets and contexts.
        self._own_sockets = settings.worker != "gevent"

    def gunicorn_variables(self) -> dict[str, Any]:
        """gunicorn's settings, by the names of its configuration module."""
        settings = self.settings
        return {
            "wsgi_app": "webhook.server.app:create_served_app()",
            "bind": [settings.bind],
            "certfile": str(settings.cert_file),
            "keyfile": str(settings.key_file),
            "worker_class": WORKER_CLASSES[settings.worker],
            "workers": settings.workers,
            "threads": settings.threads,
            # Per worker; at the cap the worker closes its oldest idle connection.
            "worker_connections": settings.max_connections,
            # The kube-apiserver keeps idle connections for 90 s; a shorter keep-alive here
            # would make it pay a TLS handshake again and race us on closing connections.
            "keepalive": 120,
            "timeout": 30,
            "graceful_timeout": 20,
            "loglevel": settings.log_level,
            "accesslog": None,
            "errorlog": "-",
            # No runtime control socket: nothing here needs one, and the deployed root
            # filesystem is read-only.
            "control_socket_disable": True,
            "logger_class": logger_class(settings),
        }

    def on_starting(self, server: Any) -> None:
        for path, what in (
            (self.settings.cert_file, "certificate"),
            (self.settings.key_file, "private key"),
        ):
            if not path.is_file():
                self._fail(
                    f"the TLS {what} {path} does not exist: run `make certs`, or set "
                    "TLS_CERT_FILE and TLS_KEY_FILE"
                )
        try:
            gunicorn_sock.ssl_context(server.cfg)
        except OSError as error:  # ssl.SSLError is one
            self._fail(
                f"the TLS certificate {self.settings.cert_file} and key {self.settings.key_file} "
                f"do not load: {error}"
            )
        attempt = load_settled_directory(self.settings.policy_dir)
        if attempt.policy_set is None:
            problems = "\n".join(f"  {problem}" for problem in attempt.problems)
            self._fail(f"the policies in {self.settings.policy_dir} do not load:\n{problems}")
        names = ", ".join(policy.name for policy in attempt.policy_set.policies)
        server.log.info("gpu-admission-webhook %s starting", __version__)
        server.log.info("policies loaded from %s: %s", self.settings.policy_dir, names)
        try:
            state_dir = self._prepare_state_dir()
            LastGood(state_dir).save(attempt.files, attempt.observed_at)
        except OSError as error:
            self._fail(
                f"the state directory is not usable: {error}; set STATE_DIR to a writable folder"
            )
        kept = "kept" if self.settings.state_dir else "created for this run, removed at exit"
        server.log.info("state directory: %s (%s)", state_dir, kept)

    def ssl_context(
        self, config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]
    ) -> ssl.SSLContext:
        if not self._own_sockets:
            # gevent's context, made in the worker once gevent has patched ssl: none kept.
            return default_ssl_context_factory()

        def build() -> ssl.SSLContext:
            context = default_ssl_context_factory()
            context.sslsocket_class = self.serving_socket
            return context

        return self._tls_contexts.context(config.certfile, config.keyfile, build)

    def pre_fork(self, server: Any, worker: Any) -> None:
        self._connection_table.seat(worker, server.WORKERS.values())

    def child_exit(self, server: Any, worker: Any) -> None:
        self._connection_table.unseat(worker)
        # Imported here: prometheus_client must not be imported before on_starting has set
        # PROMETHEUS_MULTIPROC_DIR, or the workers forked from this process keep no shared
        # metrics.
        from webhook.server.metrics import mark_worker_dead

        mark_worker_dead(worker.pid)
        forget_worker(Path(os.environ[STATE_DIR_VARIABLE]), worker.pid)

    def when_ready(self, server: Any) -> None:
        """The plain-HTTP metrics port, in the master: it merges every worker's values, as
        /metrics on the admission port does, for scrapers that speak no TLS to it, and shows every
        worker's readiness details at /status."""
        if not self.settings.metrics_bind:
            return
        # Imported here, after on_starting has set PROMETHEUS_MULTIPROC_DIR.
        from prometheus_client import generate_latest

        from webhook.metrics_http import MetricsServer
        from webhook.server.metrics import merged_registry

        registry = merged_registry(os.environ[METRICS_DIR_VARIABLE], self.settings.cert_file)
        state_dir = Path(os.environ[STATE_DIR_VARIABLE])
        host, port = parse_bind(self.settings.metrics_bind)
        try:
            metrics = MetricsServer(
                lambda: generate_latest(registry),
                host,
                port,
                status=lambda: every_worker(state_dir),
                request_seconds=self.settings.metrics_request_seconds,
            )
        except OSError as error:
            self._fail(f"METRICS_BIND {self.settings.metrics_bind}: {error.strerror or error}")
        metrics.start("metrics-port")
        server.log.info("metrics on http://%s:%d/metrics", host, metrics.port)

    def on_exit(self, server: Any) -> None:
        self._remove_created_state_dirs()

    def _prepare_state_dir(self) -> Path:
        if self.settings.state_dir is not None:
            state_dir = self.settings.state_dir.resolve()
            state_dir.mkdir(parents=True, exist_ok=True)
        else:
            state_dir = Path(tempfile.mkdtemp(prefix="gpu-webhook-"))
            self._created_state_dirs.append(state_dir)
        os.environ[STATE_DIR_VARIABLE] = str(state_dir)
        metrics_dir = state_dir / "metrics"
        # Values left by an earlier run would be merged into this one's.
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir()
        os.environ[METRICS_DIR_VARIABLE] = str(metrics_dir)
        return state_dir

    def _remove_created_state_dirs(self) -> None:
        while self._created_state_dirs:
            shutil.rmtree(self._created_state_dirs.pop(), ignore_errors=True)

    def _fail(self, message: str) -> NoReturn:
        self._remove_created_state_dirs()
        sys.exit(f"webhook: {message}")


def logger_class(settings: Settings) -> type[glogging.Logger]:
    """gunicorn's logger, with its error log written in LOG_FORMAT and the service's own log
    records written by the same handlers. gunicorn builds its handlers in `setup`, again on
    every reload, so both are done there."""
    formatter = formatter_for(settings.log_format)

    class Logger(glogging.Logger):
        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for handler in self.error_log.handlers:
                if getattr(handler, "_gunicorn", False):
                    handler.setFormatter(formatter)
            _send_webhook_log_to(self.error_log, settings.log_level)

    return Logger


def _send_webhook_log_to(error_log: logging.Logger, level: str) -> None:
    """The service's records go to the error log's handlers themselves (its stream, a log
    file, syslog, a logconfig's), not through the error log: a line is written per admission,
    and a second logger's dispatch and lock in between cost more than formatting it. Where
    those handlers are plain streams, an admission's line is written straight to them
    (log_lines.py)."""
    webhook_log = logging.getLogger("webhook")
    webhook_log.handlers = list(error_log.handlers)
    admission_lines.route(webhook_log.handlers)
    # Settings accept only gunicorn's level names.
    webhook_log.setLevel(logging.getLevelNamesMapping()[level.upper()])
    webhook_log.propagate = False
