"""`GET /metrics` and `GET /healthz` over plain HTTP, on a port of their own: what a stock
Prometheus scrape config reaches (the admission port speaks only TLS).

A thread a connection, each closed after `TIMEOUT_SECONDS` without a byte, so a stalled scrape
never holds one for long; the caller's `render` gives the metrics text.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client.exposition import CONTENT_TYPE_LATEST

TIMEOUT_SECONDS = 5


class _ThreadingHTTPServer6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class MetricsServer:
    """`GET /metrics` and `GET /healthz` over plain HTTP on a daemon thread."""

    def __init__(self, render: Callable[[], bytes], host: str, port: int) -> None:
        handler = _handler_for(render)
        server_class = _ThreadingHTTPServer6 if ":" in host else ThreadingHTTPServer
        self._httpd = server_class((host, port), handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]

    def start(self, name: str = "metrics") -> None:
        threading.Thread(target=self._httpd.serve_forever, name=name, daemon=True).start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler_for(render: Callable[[], bytes]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # A scrape or a probe that stalls must not hold a thread for long.
        timeout = TIMEOUT_SECONDS

        def log_message(self, format: str, *args: object) -> None:
            """Probes and scrapes are not worth a log line each."""

        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._answer(200, render(), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                self._answer(200, b"ok\n", "text/plain; charset=utf-8")
            else:
                self._answer(404, b"not found\n", "text/plain; charset=utf-8")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
