"""`GET /metrics`, `GET /healthz` and `GET /status` over plain HTTP, on a port of their own:
what a stock Prometheus scrape config reaches (the admission port speaks only TLS).

One event loop on one thread serves every connection, so a client that drips its request or
never reads its answer holds no thread, only a socket:
- a request has `REQUEST_SECONDS` from its connection to its whole head, and its answer as long
  again to leave; past either the connection is closed;
- at most `MAX_CONNECTIONS` are open at once: a new one past that closes the oldest that has
  not sent its whole request yet (or itself, where every other is being answered), so a burst of
  connections never cuts off a scrape being answered;
- heads over `MAX_HEAD_BYTES` are answered 431, and each answer closes its connection.
No client fault is logged: a port that anyone may reach must not let anyone fill the log.
The caller's `render` gives the metrics text and `status` the workers' details, each run on a
thread of their own, so a slow read of the metrics files never stops the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client.exposition import CONTENT_TYPE_LATEST

REQUEST_SECONDS = 10.0
MAX_CONNECTIONS = 64
MAX_HEAD_BYTES = 16 * 1024
# gunicorn's own default: a burst of connections waits in the kernel, not refused.
BACKLOG = 2048
_TEXT = "text/plain; charset=utf-8"
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout"}
_REASONS |= {400: "Bad Request", 431: "Request Header Fields Too Large"}

log = logging.getLogger("webhook")


class MetricsServer:
    """The plain-HTTP port, served from a daemon thread's event loop."""

    def __init__(
        self,
        render: Callable[[], bytes],
        host: str,
        port: int,
        *,
        status: Callable[[], bytes] | None = None,
        request_seconds: float = REQUEST_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self._render = render
        self._status = status
        self._request_seconds = request_seconds
        self._max_connections = max_connections
        self._loop = asyncio.new_event_loop()
        self._loop.set_exception_handler(_quiet)
        self._renderers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="metrics-render")
        # Each open connection, oldest first, and whether its request has arrived whole.
        self._open: OrderedDict[asyncio.Task[None], bool] = OrderedDict()
        # Bound here, so that a port in use fails the caller at once.
        self._server = self._loop.run_until_complete(
            asyncio.start_server(
                self._serve, host, port, backlog=BACKLOG, limit=MAX_HEAD_BYTES, reuse_address=True
            )
        )
        self.port: int = self._server.sockets[0].getsockname()[1]
        self._thread: threading.Thread | None = None

    def start(self, name: str = "metrics") -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            tasks = list(self._open)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._server.wait_closed()

        if self._thread is not None:
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        else:
            self._loop.run_until_complete(close())
        if not self._loop.is_running():
            self._loop.close()
        self._renderers.shutdown(wait=False)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    # --- one connection ----------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = False
        if len(self._open) > self._max_connections:
            # The oldest still sending its request; itself where all others are being answered.
            waiting = next((other for other, whole in self._open.items() if not whole), task)
            self._open.pop(waiting)
            waiting.cancel()
        try:
            async with asyncio.timeout(self._request_seconds):
                status, body, content_type = await self._answer(reader, task)
            async with asyncio.timeout(self._request_seconds):
                writer.write(_response(status, body, content_type))
                writer.close()
                await writer.wait_closed()
        except (TimeoutError, OSError, asyncio.CancelledError):
            pass  # a client too slow, or gone: the connection closes, nothing is logged
        finally:
            self._open.pop(task, None)
            writer.transport.abort()  # at once, whatever it still holds

    async def _answer(
        self, reader: asyncio.StreamReader, task: asyncio.Task[None]
    ) -> tuple[int, bytes, str]:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return 431, b"the request head is too large\n", _TEXT
        except asyncio.IncompleteReadError:
            raise ConnectionResetError("the client closed its request unfinished") from None
        if task in self._open:
            self._open[task] = True
        request_line = head.split(b"\r\n", 1)[0].split(b" ")
        if len(request_line) != 3 or not request_line[2].startswith(b"HTTP/1."):
            return 400, b"not an HTTP/1 request\n", _TEXT
        method, target = request_line[0], request_line[1].split(b"?", 1)[0]
        if method != b"GET":
            return 405, b"only GET is served here\n", _TEXT
        loop = asyncio.get_running_loop()
        if target == b"/metrics":
            return (
                200,
                await loop.run_in_executor(self._renderers, self._render),
                CONTENT_TYPE_LATEST,
            )
        if target == b"/status" and self._status is not None:
            return (
                200,
                await loop.run_in_executor(self._renderers, self._status),
                "application/json",
            )
        if target == b"/healthz":
            return 200, b"ok\n", _TEXT
        return 404, b"not found\n", _TEXT


def _response(status: int, body: bytes, content_type: str) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    """A fault the loop would print as a traceback: one line in the configured log format."""
    with contextlib.suppress(Exception):
        log.warning("metrics port: %s", context.get("exception") or context.get("message"))
