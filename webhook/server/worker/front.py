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

A request is whole when its head has ended and, with a Content-Length, its body has arrived. A
request with `Transfer-Encoding` or `Expect: 100-continue`, and a head longer than
`max_head_bytes`, go to a thread as soon as their head (or the limit) is read: gunicorn answers
those (and the thread's reads are bounded by CLIENT_STALL_SECONDS). One whose Content-Length is
over the body limit is answered 413 here and its connection closed, since the body it leaves
unread would otherwise be read as the next request; the app still counts and logs it
(front_refusals.py). The kube-apiserver sends none of these.
"""

from __future__ import annotations

import contextlib
import json
import re
import selectors
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gunicorn import http
from gunicorn import sock as gunicorn_sock

from webhook.server.front_refusals import Refused

RECV_BYTES = 64 * 1024
HEAD_END = b"\r\n\r\n"
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*([0-9]{1,19})[ \t]*(?:\r\n|$)")
SENT_AT_HEAD = (b"\r\ntransfer-encoding:", b"\r\nexpect:")


class Framing(Enum):
    MORE = "more"  # not whole yet: keep reading
    WHOLE = "whole"  # head and body are here
    AT_HEAD = "at-head"  # the thread takes it from here (see the module's docstring)
    TOO_LARGE = "too-large"  # a Content-Length over the body limit: answered here, and closed


def framing(buffered: bytes | bytearray, max_head_bytes: int, max_body_bytes: int) -> Framing:
    """Whether the first request in `buffered` has arrived whole."""
    end = buffered.find(HEAD_END)
    if end < 0:
        return Framing.MORE if len(buffered) <= max_head_bytes else Framing.AT_HEAD
    # The request line is left in: a header must start after a line break.
    head = bytes(buffered[:end]).lower()
    if any(marker in head for marker in SENT_AT_HEAD):
        return Framing.AT_HEAD
    found = CONTENT_LENGTH.search(head)
    if found is None:
        return Framing.WHOLE
    length = int(found[1])
    if length > max_body_bytes:
        return Framing.TOO_LARGE
    return Framing.WHOLE if len(buffered) >= end + len(HEAD_END) + length else Framing.MORE


def request_path(buffered: bytes | bytearray) -> str:
    """The path of the request line at the start of `buffered`, without its query; "" when
    there is none to read."""
    end = buffered.find(b"\r\n")
    line = bytes(buffered if end < 0 else buffered[:end])
    parts = line.split(b" ")
    if len(parts) != 3:
        return ""
    return parts[1].split(b"?", 1)[0].decode("ascii", "replace")


@dataclass(frozen=True)
class FrontLimits:
    first_bytes_seconds: float = 1.0
    request_seconds: float = 10.0
    max_head_bytes: int = 64 * 1024
    max_body_bytes: int = 8 * 2**20
    buffer_budget: int = 64 * 2**20


class _Phase(Enum):
    HANDSHAKE = "handshake"
    REQUEST = "request"


@dataclass(eq=False)
class _Arriving:
    conn: Any  # gunicorn's TConn
    phase: _Phase
    deadline: float
    since: float
    buffer: bytearray = field(default_factory=bytearray)
    events: int = selectors.EVENT_READ

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
        if not conn.initialized:
            conn.sock.setblocking(False)
            conn.sock = gunicorn_sock.ssl_wrap_socket(conn.sock, self._cfg)
            entry = _Arriving(conn, _Phase.HANDSHAKE, now + self.limits.first_bytes_seconds, now)
        else:
            conn.sock.setblocking(False)
            entry = _Arriving(conn, _Phase.REQUEST, now + self.limits.request_seconds, now)
            entry.buffer += conn.parser.unreader.take_buffered()
            self._buffered += len(entry.buffer)
        self._arriving[conn] = entry
        self._poller.register(conn.sock, selectors.EVENT_READ, self._on_event(entry))
        # A kept-alive connection comes readable, and OpenSSL may hold what was read already.
        self._advance(entry)

    def whole(self, conn: Any) -> bool:
        """Whether the bytes `conn`'s parser holds already make a whole request."""
        held = conn.parser.unreader.buf.getvalue()
        limits = self.limits
        return bool(held) and (
            framing(held, limits.max_head_bytes, limits.max_body_bytes) is not Framing.MORE
        )

    # --- time ----------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return min((entry.deadline for entry in self._arriving.values()), default=None)

    def expire(self) -> None:
        """Close every connection whose time has run out."""
        now = self._clock()
        for entry in [e for e in self._arriving.values() if e.deadline <= now]:
            self._give_up(entry)

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
        limits = self.limits
        sock = entry.conn.sock
        while True:
            try:
                data = sock.recv(RECV_BYTES)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            except ssl.SSLWantWriteError:
                self._wait_for(entry, selectors.EVENT_WRITE)
                return
            if not data:
                # The client closed: it was idle between requests, or gave up on one.
                self._give_up(entry)
                return
            if not entry.buffer:
                # The first bytes of a request: from now on it has `request_seconds`.
                entry.deadline = self._clock() + limits.request_seconds
            entry.buffer += data
            self._buffered += len(data)
            if self._buffered > limits.buffer_budget:
                self._give_up(entry)
                return
            state = framing(entry.buffer, limits.max_head_bytes, limits.max_body_bytes)
            if state is Framing.TOO_LARGE:
                self._refuse_too_large(entry)
                return
            if state is not Framing.MORE:
                self._hand_on(entry)
                return
        self._wait_for(entry, selectors.EVENT_READ)

    def _refuse_too_large(self, entry: _Arriving) -> None:
        """413 and close: left open, the connection's next bytes would be the body refused."""
        reason = f"the body is larger than {self.limits.max_body_bytes // 2**20} MiB"
        body = json.dumps({"error": reason, "code": 413}, separators=(",", ":")).encode()
        head = (
            b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            entry.conn.sock.send(head + body)
        self._give_up(entry)
        self._refused(request_path(entry.buffer), 413, reason)

    def _hand_on(self, entry: _Arriving) -> None:
        conn = self._forget(entry)
        conn.parser.unreader.unread(bytes(entry.buffer))
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
