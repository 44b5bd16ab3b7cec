"""gunicorn's gthread worker, with three changes for a few busy kept-alive connections.

The kube-apiserver sends its reviews over a handful of connections it keeps open. gthread
serves each request in a pool thread, then hands the connection back to the main thread's
poller and, at the next request, to a pool thread again: a pipe write, poller calls and thread
switches per request. Here a pool thread keeps serving its connection while the next request
comes promptly, nothing else waits for a thread and the worker is not stopping; otherwise the
connection goes back the way gthread sends it, with the bookkeeping gthread expects.

A kept-alive connection stays with the worker that accepted it, and which worker accepts is a
race: the apiserver's few connections can all land on one worker while another is idle. Here a
worker that holds more connections than a sibling stops watching the listener for a moment, so
that the sibling takes the connection; if it is still waiting after that, this worker takes it,
so a busy or dead sibling never keeps a client waiting for long. The counts live in a table the
master shares with its workers (connection_table.py).

A response goes out in one write: a TLS socket that can hold writes (held_writes_tls.py) holds
them while the request is served, and sends them when it is done.
"""

from __future__ import annotations

import contextlib
import select
import selectors
import ssl
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook.server.held_writes_tls import WriteHoldingSSLSocket
from webhook.server.worker.connection_table import WorkerRow

# How long a pool thread waits for the next request on its connection, checking between
# slices (poll counts in milliseconds) whether another connection waits for a thread. A client
# with more to send sends it at once.
NEXT_REQUEST_LINGER = 0.002
_LINGER_SLICE_MS = 1
# How long a worker with more connections than a sibling leaves a new one to the sibling.
ACCEPT_DEFERRAL = 0.002


class _ThreadPool(ThreadPoolExecutor):
    def waiting(self) -> int:
        """How many submitted jobs no thread has started yet."""
        return self._work_queue.qsize()


class KeepAliveThreadWorker(ThreadWorker):
    # Given by the master before the fork (ConnectionTable.seat); None: no balancing.
    connection_row: WorkerRow | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open_connections = 0
        self._accept_deferred_until: float | None = None
        super().__init__(*args, **kwargs)

    # gthread counts open connections in nr_conns, on the main thread, wherever one is accepted
    # or closed; each change is published to the siblings as it is made.
    @property
    def nr_conns(self) -> int:
        return self._open_connections

    @nr_conns.setter
    def nr_conns(self, value: int) -> None:
        self._open_connections = value
        if self.connection_row is not None:
            self.connection_row.publish(value)

    def finish_request(self, conn: TConn, fs: Future[Any]) -> None:
        before = self.nr_conns
        super().finish_request(conn, fs)
        # gthread counts a connection out twice when closing it fails (a socket the handler
        # already closed): one request finished is one connection less at most.
        if self.nr_conns < before - 1:
            self.nr_conns = before - 1

    def init_process(self) -> None:
        if self.cfg.reuse_port:
            # Each worker has its own listener then: a connection it leaves, no sibling takes.
            self.connection_row = None
        super().init_process()

    def get_thread_pool(self) -> ThreadPoolExecutor:
        return _ThreadPool(max_workers=self.cfg.threads)

    # -- serving the next request on the same thread --------------------------------------

    def handle(self, conn: TConn) -> Any:
        keepalive = super().handle(conn)
        while keepalive is True and self._next_request_is_prompt(conn):
            keepalive = super().handle(conn)
        return keepalive

    def handle_request(self, req: Any, conn: TConn) -> Any:
        sock = conn.sock
        if not isinstance(sock, WriteHoldingSSLSocket):
            return super().handle_request(req, conn)
        sock.hold_writes()
        try:
            keepalive = super().handle_request(req, conn)
        except BaseException:
            # gthread answers or closes as it would have; what the response had written goes
            # first, if the client is still there to read it.
            with contextlib.suppress(OSError):
                sock.send_held()
            raise
        # A client gone by now fails here as it would have on the write itself.
        sock.send_held()
        return keepalive

    def _next_request_is_prompt(self, conn: TConn) -> bool:
        if isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
            # A pipelined request OpenSSL has already read: it would never wake gthread's
            # poller, so it is served here, whatever else waits.
            return True
        if conn.parser.unreader.buf.getvalue():
            # gthread queues it again itself when it does not go on here.
            return self._may_linger()
        poller = select.poll()
        poller.register(conn.sock, select.POLLIN)
        deadline = time.monotonic() + NEXT_REQUEST_LINGER
        while self._may_linger():
            if poller.poll(_LINGER_SLICE_MS):
                return self._may_linger()
            if time.monotonic() >= deadline:
                return False
        return False

    def _may_linger(self) -> bool:
        return self.alive and self.tpool.waiting() == 0

    # -- spreading connections across workers ---------------------------------------------

    def set_accept_enabled(self, enabled: bool) -> None:
        if self._accept_deferred_until is not None:
            # gthread's own bookkeeping expects the listeners in the poller.
            self._accept_deferred_until = None
            self._watch_listeners()
        super().set_accept_enabled(enabled)
        if self.connection_row is not None:
            self.connection_row.set_accepting(self._accepting and self.alive)

    def accept(self, listener: Any) -> None:
        if self._accept_deferred_until is not None:
            # Another listener's event from the poll that deferred: taken when it ends.
            return
        if self.connection_row is not None and self.connection_row.crowded():
            for each in self.sockets:
                self.poller.unregister(each)
            self._accept_deferred_until = time.monotonic() + ACCEPT_DEFERRAL
            return
        super().accept(listener)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        if self._accept_deferred_until is not None:
            timeout = min(timeout, max(self._accept_deferred_until - time.monotonic(), 0.0))
        super().wait_for_and_dispatch_events(timeout)
        if (
            self._accept_deferred_until is not None
            and time.monotonic() >= self._accept_deferred_until
        ):
            self._accept_deferred_until = None
            self._watch_listeners()
            # What still waits, the siblings left: take it now rather than defer again.
            for listener in self.sockets:
                if self.nr_conns < self.worker_connections:
                    super().accept(listener)

    def _watch_listeners(self) -> None:
        for listener in self.sockets:
            self.poller.register(listener, selectors.EVENT_READ, self.accept)
