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

With the evented front (front.py, FRONT=evented, the default), no pool thread ever waits on a
client: the main thread does the TLS handshakes and reads each request whole before a thread
takes it, and a pool thread goes on to a connection's next request only when that has arrived
whole too. At its cap of open connections (MAX_CONNECTIONS) the worker closes its oldest idle
connection to take a new one. When it stops, it closes its listeners at once (so that, once its
siblings and master have too, new connections are refused rather than left waiting) and its
silent connections; requests already read are answered.
"""

from __future__ import annotations

import contextlib
import select
import selectors
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook.server.edge.connection_table import WorkerRow
from webhook.server.edge.front import Front, FrontLimits
from webhook.server.edge.served_app import refusal_callback
from webhook.server.settings import Settings

# How long a pool thread waits for the next request on its connection, checking between
# slices (poll counts in milliseconds) whether another connection waits for a thread. A client
# with more to send sends it at once.
NEXT_REQUEST_LINGER = 0.002
_LINGER_SLICE_MS = 1
# How long a worker with more connections than a sibling leaves a new one to the sibling.
ACCEPT_DEFERRAL = 0.002


class _ThreadPool(ThreadPoolExecutor):
    """Counts the jobs submitted that no thread has started yet, through its public calls."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers)
        self._waiting = 0
        self._count_lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._count_lock:
            self._waiting += 1
        return super().submit(self._started, fn, *args, **kwargs)

    def waiting(self) -> int:
        return self._waiting

    def _started(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self._count_lock:
            self._waiting -= 1
        return fn(*args, **kwargs)


class KeepAliveThreadWorker(ThreadWorker):
    # Given by the master before the fork (ConnectionTable.seat); None: no balancing.
    connection_row: WorkerRow | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open_connections = 0
        self._accept_deferred_until: float | None = None
        self._front: Front | None = None
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

    def run(self) -> None:
        # The poller exists only now: gthread makes it in init_process, just before run.
        settings = Settings.from_environ()
        if settings.front == "evented":
            self._front = Front(
                self.cfg,
                self.poller,
                FrontLimits(
                    first_bytes_seconds=settings.first_bytes_seconds,
                    request_seconds=settings.request_seconds,
                    max_body_bytes=settings.max_body_bytes,
                ),
                dispatch=lambda conn: ThreadWorker.enqueue_req(self, conn),
                close=self._close_arriving,
                refused=self._refused_at_front,
            )
        super().run()

    # -- the evented front --------------------------------------------------------------------

    def enqueue_req(self, conn: TConn) -> None:
        front = self._front
        if front is None or (conn.initialized and front.whole(conn)):
            super().enqueue_req(conn)
        else:
            front.take(conn)

    def _refused_at_front(self, path: str, status: int | None, reason: str) -> None:
        """Runs on the worker's main thread, in its poll loop: nothing may escape it."""
        refused = refusal_callback(self.wsgi)
        if refused is None:
            return
        try:
            refused(path, status, reason)
        except Exception:
            self.log.exception("counting a request the front refused failed")

    def _close_arriving(self, conn: TConn) -> None:
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        super().murder_pending()
        if self._front is not None:
            self._front.expire()

    def _close_oldest_idle(self) -> None:
        """At the cap of open connections: the oldest of the silent and kept-alive ones goes."""
        oldest_silent = self._front.oldest_silent() if self._front is not None else None
        kept = self.keepalived_conns[0] if self.keepalived_conns else None
        # A kept-alive connection's timeout is its last request's end plus the keep-alive.
        kept_since = kept.timeout - self.cfg.keepalive if kept is not None else None
        if oldest_silent is not None and (kept_since is None or oldest_silent[0] <= kept_since):
            oldest_silent[1]()
        elif kept is not None:
            self.keepalived_conns.popleft()
            with contextlib.suppress(OSError, KeyError, ValueError):
                self.poller.unregister(kept.sock)
            self.nr_conns -= 1
            kept.close()

    # -- serving the next request on the same thread --------------------------------------

    def handle(self, conn: TConn) -> Any:
        keepalive = super().handle(conn)
        while (
            keepalive is True
            and self._next_request_is_prompt(conn)
            and self._whole_request_at_hand(conn)
        ):
            keepalive = super().handle(conn)
        return keepalive

    def _whole_request_at_hand(self, conn: TConn) -> bool:
        """Read what has arrived without waiting; whether it makes a whole request. What does
        not goes back to the main thread with the connection, buffered, for the front."""
        front = self._front
        if front is None:
            return True
        unreader = conn.parser.unreader
        arrived = bytearray(unreader.take_buffered())
        conn.sock.setblocking(False)
        try:
            while len(arrived) <= front.limits.max_head_bytes + front.limits.max_body_bytes:
                data = conn.sock.recv(65536)
                if not data:
                    break
                arrived += data
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            pass
        finally:
            unreader.unread(bytes(arrived))
            conn.sock.setblocking(True)
        return front.whole(conn)

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
            self.connection_row.set_accepting(enabled and self.alive)
        if not enabled and not self.alive and self._front is not None:
            self._stop_taking()

    def _stop_taking(self) -> None:
        """A stopping worker: what waits in its listen queue is refused once every process
        has closed its listeners, and connections that sent nothing are closed now."""
        for listener in self.sockets:
            with contextlib.suppress(OSError):
                listener.close()
        assert self._front is not None
        closed = self._front.close_silent()
        if closed:
            self.log.debug("closed %d silent connections on the way out", closed)

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
        front = self._front
        if front is not None:
            if self.alive and self.nr_conns >= self.worker_connections:
                self._close_oldest_idle()
            deadline = front.next_deadline()
            if deadline is not None:
                # Wake for the first deadline; gthread's loop closes what has run out.
                timeout = min(timeout, max(deadline - time.monotonic(), 0.0) + 0.001)
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
