"""The evented front of a worker: a connection's TLS handshake and the reading of each request
happen on the worker's main thread, between poller events, and a request reaches one of the
few pool threads only once it has arrived whole.

Without it a pool thread takes a new connection at once and waits there for the handshake and
the request, so a handful of connections that send nothing, or half a request, hold every
thread and stall every review behind them. Here such a connection costs a socket and its bytes
so far, and is closed when it runs out of time:

- a new connection must finish its handshake and send its request's first bytes within
  `first_bytes_seconds` (the apiserver sends at once);
- a request must arrive whole within `request_seconds` of its first bytes, however slowly its
  bytes trickle in;
- the bytes held for requests still arriving are bounded per worker (`buffer_budget`): a
  request that would pass the budget closes its connection.

Whether a request is whole is request_framing.py's to say, for each framing it may come in:
a Content-Length, a chunked body, or a head that asks for `100 Continue` first (sent from here,
once the head has arrived). What cannot be framed, or is over a limit, is answered here (413,
431, 400 or 501) and its connection closed, since the bytes it leaves unread would otherwise
be read as the next request. A request that does not arrive whole in time is answered 408; one
whose client closes before it has is only counted. Each of these goes to `refused`, so that
the app counts and logs it as a client fault (served_app.py). The kube-apiserver sends
none of them: it sends a whole request with a Content-Length at once.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gunicorn import http
from gunicorn import sock as gunicorn_sock

from webhook.server.edge.request_framing import (
    Arrival,
    FramingLimits,
    RequestArrival,
    request_path,
)
from webhook.server.edge.served_app import Refused

RECV_BYTES = 64 * 1024
# Read from one connection per wake-up at most, so that a client that sends fast (a body
# bound for a 413) takes turns with the handshakes and reads of the others.
READ_PER_WAKE = 256 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_STATUS_TEXT = {
    400: "Bad Request",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
}


@dataclass(frozen=True)
class FrontLimits:
    first_bytes_seconds: float = 1.0
    request_seconds: float = 10.0
    max_head_bytes: int = 64 * 1024
    max_body_bytes: int = 8 * 2**20
    max_chunks: int = 8192
    buffer_budget: int = 64 * 2**20

    @property
    def framing(self) -> FramingLimits:
        return FramingLimits(self.max_head_bytes, self.max_body_bytes, self.max_chunks)


class _Phase(Enum):
    HANDSHAKE = "handshake"
    REQUEST = "request"


@dataclass(eq=False)
class _Arriving:
    conn: Any  # gunicorn's TConn
    phase: _Phase
    deadline: float
    since: float
    arrival: RequestArrival
    buffer: bytearray = field(default_factory=bytearray)
    events: int = selectors.EVENT_READ
    continued: bool = False  # `100 Continue` has been sent for this request

    @property
    def silent(self) -> bool:
        """Nothing of a request has arrived: closing it loses no work."""
        return not self.buffer


class Front:
    """Connections on their way to a pool thread, watched by `poller` (the worker's). A whole
    request goes to `dispatch`; a connection given up goes to `close`."""

    def __init__(
        self,
        cfg: Any,
        poller: selectors.BaseSelector,
        limits: FrontLimits,
        *,
        dispatch: Callable[[Any], None],
        close: Callable[[Any], None],
        refused: Refused = lambda path, status, reason: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cfg = cfg
        self._poller = poller
        self.limits = limits
        self._framing = limits.framing
        self._dispatch = dispatch
        self._close = close
        self._refused = refused
        self._clock = clock
        self._arriving: dict[Any, _Arriving] = {}
        self._buffered = 0

    # --- taking connections ------------------------------------------------------------------

    def take(self, conn: Any) -> None:
        """Watch `conn` until its next request is whole: a new connection from its handshake,
        a kept-alive one from the bytes of its next request (some may be buffered already)."""
        now = self._clock()
        arrival = RequestArrival(self._framing)
        if not conn.initialized:
            try:
                conn.sock.setblocking(False)
                conn.sock = gunicorn_sock.ssl_wrap_socket(conn.sock, self._cfg)
            except OSError:
                # Reset before it was wrapped (the wrap reads from the socket): nothing to
                # answer, and nothing may escape into the worker's accept loop.
                self._close(conn)
                return
            deadline = now + self.limits.first_bytes_seconds
            entry = _Arriving(conn, _Phase.HANDSHAKE, deadline, now, arrival)
        else:
            conn.sock.setblocking(False)
            deadline = now + self.limits.request_seconds
            entry = _Arriving(conn, _Phase.REQUEST, deadline, now, arrival)
            entry.buffer += conn.parser.unreader.take_buffered()
            self._buffered += len(entry.buffer)
        self._arriving[conn] = entry
        self._poller.register(conn.sock, selectors.EVENT_READ, self._on_event(entry))
        if entry.buffer:
            # What a thread read ahead may be a request already answerable here: one to
            # refuse, or a head that waits for its `100 Continue`.
            self._progress(entry)
        # A kept-alive connection comes readable, and OpenSSL may hold what was read already.
        self._advance(entry)

    def whole(self, conn: Any) -> bool:
        """Whether the bytes `conn`'s parser holds already make a whole request."""
        held = conn.parser.unreader.buf.getvalue()
        return bool(held) and RequestArrival(self._framing).advance(held) is Arrival.WHOLE

    # --- time ----------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return min((entry.deadline for entry in self._arriving.values()), default=None)

    def expire(self) -> None:
        """Close every connection whose time has run out; one that had begun a request is
        answered 408 first."""
        now = self._clock()
        for entry in [e for e in self._arriving.values() if e.deadline <= now]:
            if entry.silent:
                self._give_up(entry)
            else:
                seconds = f"{self.limits.request_seconds:g}"
                self._refuse(entry, 408, f"the request did not arrive whole within {seconds} s")

    def close_silent(self) -> int:
        """Close the connections nothing of a request has arrived on (a worker that stops)."""
        silent = [entry for entry in self._arriving.values() if entry.silent]
        for entry in silent:
            self._give_up(entry)
        return len(silent)

    def oldest_silent(self) -> tuple[float, Callable[[], None]] | None:
        """When the oldest silent connection came, and how to close it; None when none is."""
        silent = [entry for entry in self._arriving.values() if entry.silent]
        if not silent:
            return None
        oldest = min(silent, key=lambda entry: entry.since)
        return oldest.since, lambda: self._give_up(oldest)

    # --- progress --------------------------------------------------------------------------------

    def _on_event(self, entry: _Arriving) -> Callable[[Any], None]:
        return lambda _fileobj: self._advance(entry)

    def _advance(self, entry: _Arriving) -> None:
        if entry.conn not in self._arriving:
            return
        try:
            if entry.phase is _Phase.HANDSHAKE and not self._handshake(entry):
                return
            self._read(entry)
        except (OSError, ValueError):
            # ssl.SSLError is an OSError: a client that is not speaking TLS, or went away.
            self._give_up(entry)

    def _handshake(self, entry: _Arriving) -> bool:
        conn = entry.conn
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._wait_for(entry, selectors.EVENT_READ)
            return False
        except ssl.SSLWantWriteError:
            self._wait_for(entry, selectors.EVENT_WRITE)
            return False
        if gunicorn_sock.is_http2_negotiated(conn.sock):
            raise ValueError("HTTP/2 is not served")
        conn.parser = http.get_parser(self._cfg, conn.sock, conn.client)
        conn.initialized = True
        entry.phase = _Phase.REQUEST
        self._wait_for(entry, selectors.EVENT_READ)
        return True

    def _read(self, entry: _Arriving) -> None:
        sock = entry.conn.sock
        taken = 0
        while taken < READ_PER_WAKE or sock.pending():
            try:
                data = sock.recv(RECV_BYTES)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            except ssl.SSLWantWriteError:
                self._wait_for(entry, selectors.EVENT_WRITE)
                return
            if not data:
                self._client_closed(entry)
                return
            if not entry.buffer:
                # The first bytes of a request: from now on it has `request_seconds`.
                entry.deadline = self._clock() + self.limits.request_seconds
            entry.buffer += data
            taken += len(data)
            self._buffered += len(data)
            if self._buffered > self.limits.buffer_budget:
                self._give_up(entry)
                return
            if not self._progress(entry):
                return
        self._wait_for(entry, selectors.EVENT_READ)

    def _progress(self, entry: _Arriving) -> bool:
        """Judge the request buffered so far: hand it on when whole, refuse it, or send its
        `100 Continue`. Whether it still waits here for more."""
        state = entry.arrival.advance(entry.buffer)
        if state is Arrival.WHOLE:
            self._hand_on(entry)
            return False
        if state is Arrival.REFUSED:
            refusal = entry.arrival.refusal
            assert refusal is not None
            self._refuse(entry, refusal.status, refusal.reason)
            return False
        if entry.arrival.continue_due and not entry.continued:
            entry.continued = True
            with contextlib.suppress(OSError):  # a client gone is found at the next read
                entry.conn.sock.send(CONTINUE)
        return True

    def _client_closed(self, entry: _Arriving) -> None:
        """The client closed: it was idle between requests, or gave up on one (counted)."""
        begun = not entry.silent
        path = request_path(entry.buffer)
        self._give_up(entry)
        if begun:
            self._refused(
                path, None, "the client closed the connection before its request arrived whole"
            )

    def _refuse(self, entry: _Arriving, status: int, reason: str) -> None:
        """Answer `status` and close: left open, the connection's next bytes would be the rest
        of the request refused."""
        body = json.dumps({"error": reason, "code": status}, separators=(",", ":")).encode()
        head = (
            f"HTTP/1.1 {status} {_STATUS_TEXT[status]}\r\nContent-Type: application/json\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        with contextlib.suppress(OSError):
            entry.conn.sock.send(head + body)
        path = request_path(entry.buffer)
        self._give_up(entry)
        self._refused(path, status, reason)

    def _hand_on(self, entry: _Arriving) -> None:
        conn = self._forget(entry)
        request = (
            entry.arrival.without_expectation(entry.buffer) if entry.continued else entry.buffer
        )
        conn.parser.unreader.unread(bytes(request))
        conn.data_ready = True
        self._dispatch(conn)

    def _give_up(self, entry: _Arriving) -> None:
        self._close(self._forget(entry))

    def _forget(self, entry: _Arriving) -> Any:
        del self._arriving[entry.conn]
        self._buffered -= len(entry.buffer)
        with contextlib.suppress(KeyError, ValueError):
            self._poller.unregister(entry.conn.sock)
        return entry.conn

    def _wait_for(self, entry: _Arriving, events: int) -> None:
        if entry.events != events:
            entry.events = events
            self._poller.modify(entry.conn.sock, events, self._on_event(entry))
