"""When a request has arrived whole, whatever its framing, read from the bytes buffered so far.

The evented front (front.py) hands a request to a pool thread only when this says it is whole,
so that no thread ever waits for the rest of a body. A body comes one of three ways: none at
all, a Content-Length, or `Transfer-Encoding: chunked`, where the end is the last chunk and its
trailer section. A request that says `Expect: 100-continue` waits for that answer before it
sends its body; the front gives it, and this module says when it is due.

What cannot be framed without guessing is refused here, before any thread sees it: a body over
the limit (counted as sent, chunk lines and all), a head over its limit, a Content-Length that
is not one number, Content-Length beside Transfer-Encoding (the classic smuggling pair), a
coding other than plain `chunked`, a header line folded or with whitespace before its colon,
and a chunked body that breaks its grammar (RFC 9112 7.1).
Everything else about the head (its header names and values) is gunicorn's to judge: by then
the request is whole, so its answer never waits on the client.

A chunked body is scanned once, from where the last call stopped, so a client that sends its
body a byte at a time costs no more than one that sends it at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

HEAD_END = b"\r\n\r\n"
CRLF = b"\r\n"
# A chunk-size line is a few hex digits and perhaps an extension; gunicorn's own bound.
MAX_CHUNK_LINE_BYTES = 4096
MAX_CHUNK_SIZE_DIGITS = 16
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
# RFC 9112 7.1.1: chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ),
# as gunicorn reads it.
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = rb'"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"'
_CHUNK_EXTENSION = re.compile(
    rb"(?:[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + _TOKEN + rb"|" + _QUOTED + rb"))?)*"
)
_EXPECT_LINE = re.compile(rb"\r\nexpect:[^\r\n]*", re.IGNORECASE)


class Arrival(Enum):
    MORE = "more"  # not whole yet: keep reading
    WHOLE = "whole"  # head and body are here
    REFUSED = "refused"  # answered at the front with `refusal`, then closed


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    reason: str


@dataclass(frozen=True, slots=True)
class FramingLimits:
    max_head_bytes: int = 64 * 1024
    max_body_bytes: int = 8 * 2**20
    # Real chunked clients send kilobytes a chunk; a body in thousands of one-byte chunks is
    # only work for the scanner.
    max_chunks: int = 8192


@dataclass(frozen=True, slots=True)
class _Head:
    end: int  # where the body starts
    length: int | None  # a Content-Length body; None: chunked or no body
    chunked: bool
    expects_continue: bool


class RequestArrival:
    """The progress of the one request at the start of a connection's buffered bytes."""

    __slots__ = (
        "_chunks",
        "_head",
        "_limits",
        "_next_line",
        "_searched",
        "_trailer_searched",
        "_trailers",
        "refusal",
    )

    def __init__(self, limits: FramingLimits) -> None:
        self._limits = limits
        self._head: _Head | None = None
        self._searched = 0  # head bytes already searched for its end
        self._next_line = 0  # chunked: where the next chunk-size line starts
        self._chunks = 0
        self._trailers = False  # chunked: the last chunk is read, its trailers are due
        self._trailer_searched = 0  # trailer bytes already searched for their end
        self.refusal: Refusal | None = None

    @property
    def continue_due(self) -> bool:
        """The head asks for `100 Continue` before its body: whether this request has one to
        send (a caller sends it once, while the answer is MORE)."""
        head = self._head
        return head is not None and head.expects_continue and (head.chunked or bool(head.length))

    def advance(self, buffered: bytes | bytearray) -> Arrival:
        """Where the request stands, given every byte of it buffered so far (the same buffer,
        grown, on each call)."""
        if self.refusal is not None:
            return Arrival.REFUSED
        head = self._head
        if head is None:
            head = self._read_head(buffered)
            if head is None:
                return Arrival.REFUSED if self.refusal is not None else Arrival.MORE
        if head.chunked:
            return self._scan_chunks(buffered, head)
        if head.length is None:
            return Arrival.WHOLE
        return Arrival.WHOLE if len(buffered) >= head.end + head.length else Arrival.MORE

    def without_expectation(self, buffered: bytes | bytearray) -> bytes:
        """`buffered` with the head's Expect line taken out, for a request whose `100
        Continue` the front has sent: gunicorn would otherwise send another."""
        assert self._head is not None
        end = self._head.end
        return _EXPECT_LINE.sub(b"", bytes(buffered[:end])) + bytes(buffered[end:])

    # --- the head ------------------------------------------------------------------------

    def _read_head(self, buffered: bytes | bytearray) -> _Head | None:
        end = buffered.find(HEAD_END, max(self._searched - 3, 0))
        if end < 0:
            self._searched = len(buffered)
            if len(buffered) > self._limits.max_head_bytes:
                self._refuse(431, f"the request head is larger than {self._kib_of_head()} KiB")
            return None
        if end > self._limits.max_head_bytes:
            self._refuse(431, f"the request head is larger than {self._kib_of_head()} KiB")
            return None
        head = self._frame(bytes(buffered[:end]), end + len(HEAD_END))
        if head is not None:
            self._head = head
            self._next_line = head.end
        return head

    def _kib_of_head(self) -> int:
        return self._limits.max_head_bytes // 1024

    def _frame(self, head_bytes: bytes, body_start: int) -> _Head | None:
        # RFC 9112 2.2: empty lines before the request line are ignored.
        lines = head_bytes.lstrip(CRLF).lower().split(CRLF)
        lengths: list[bytes] = []
        codings: list[bytes] = []
        expects_continue = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name[:1] in (b" ", b"\t") or name != name.rstrip(b" \t"):
                # RFC 9112 5.1 and 5.2: whitespace before the colon, or a line folded onto the
                # one before, is refused: read two ways, it is how requests are smuggled.
                self._refuse(400, "a header line is folded or has whitespace before its colon")
                return None
            if name == b"content-length":
                lengths.append(value.strip(b" \t"))
            elif name == b"transfer-encoding":
                codings.extend(coding.strip(b" \t") for coding in value.split(b","))
            elif name == b"expect":
                expects_continue = value.strip(b" \t") == b"100-continue"
        # RFC 9110 10.1.1: an HTTP/1.0 client's expectation is ignored.
        expects_continue = expects_continue and lines[0].endswith(b" http/1.1")
        if codings:
            if lengths:
                self._refuse(
                    400, "a request must not carry both Transfer-Encoding and Content-Length"
                )
                return None
            if codings != [b"chunked"]:
                self._refuse(501, "only Transfer-Encoding: chunked is served")
                return None
            return _Head(body_start, None, True, expects_continue)
        if not lengths:
            return _Head(body_start, None, False, False)
        if len(lengths) > 1 or not (lengths[0].isdigit() and len(lengths[0]) <= 19):
            self._refuse(400, "the Content-Length header is not one number")
            return None
        length = int(lengths[0])
        if length > self._limits.max_body_bytes:
            self._refuse_too_large()
            return None
        return _Head(body_start, length, False, expects_continue)

    # --- a chunked body --------------------------------------------------------------------

    def _scan_chunks(self, buffered: bytes | bytearray, head: _Head) -> Arrival:
        limits = self._limits
        at = self._next_line
        while True:
            if at - head.end > limits.max_body_bytes:
                self._refuse_too_large()
                return Arrival.REFUSED
            if self._trailers:
                return self._scan_trailers(buffered, at, head)
            line_end = buffered.find(CRLF, at, at + MAX_CHUNK_LINE_BYTES + 2)
            if line_end < 0:
                if len(buffered) - at > MAX_CHUNK_LINE_BYTES:
                    self._refuse(400, "a chunk-size line of the body is too long")
                    return Arrival.REFUSED
                return Arrival.MORE
            size = self._chunk_size(bytes(buffered[at:line_end]))
            if size is None:
                return Arrival.REFUSED
            if size == 0:
                self._trailers = True
                at = self._next_line = line_end + len(CRLF)
                continue
            data_end = line_end + len(CRLF) + size
            if data_end - head.end > limits.max_body_bytes:
                self._refuse_too_large()
                return Arrival.REFUSED
            if len(buffered) < data_end + len(CRLF):
                return Arrival.MORE
            if buffered[data_end : data_end + len(CRLF)] != CRLF:
                self._refuse(400, "a chunk of the body does not end where its size says")
                return Arrival.REFUSED
            self._chunks += 1
            if self._chunks > limits.max_chunks:
                self._refuse(413, f"the body is sent in more than {limits.max_chunks} chunks")
                return Arrival.REFUSED
            at = self._next_line = data_end + len(CRLF)

    def _chunk_size(self, line: bytes) -> int | None:
        digits, semicolon, extension = line.partition(b";")
        if semicolon:
            # Whitespace is allowed before an extension only.
            digits = digits.rstrip(b" \t")
            if not _CHUNK_EXTENSION.fullmatch(b";" + extension):
                self._refuse(400, "a chunk of the body has an invalid extension")
                return None
        if not digits or len(digits) > MAX_CHUNK_SIZE_DIGITS or not _HEX_DIGITS.issuperset(digits):
            self._refuse(400, "a chunk of the body has no valid size")
            return None
        return int(digits, 16)

    def _scan_trailers(self, buffered: bytes | bytearray, at: int, head: _Head) -> Arrival:
        """After the last chunk: an empty line, or trailer fields and then one."""
        if len(buffered) < at + len(CRLF):
            return Arrival.MORE
        if buffered[at : at + len(CRLF)] == CRLF:
            return Arrival.WHOLE
        searched = max(at, self._trailer_searched - 3)
        end = buffered.find(HEAD_END, searched)
        self._trailer_searched = len(buffered)
        if end < 0:
            if len(buffered) - at > self._limits.max_head_bytes:
                self._refuse(431, "the trailer section of the body is too large")
                return Arrival.REFUSED
            return Arrival.MORE
        trailers = bytes(buffered[at:end])
        if trailers.count(b"\n") != trailers.count(CRLF):
            self._refuse(400, "a trailer line of the body ends in a bare line feed")
            return Arrival.REFUSED
        return Arrival.WHOLE

    def _refuse_too_large(self) -> None:
        self._refuse(413, f"the body is larger than {self._limits.max_body_bytes // 2**20} MiB")

    def _refuse(self, status: int, reason: str) -> None:
        self.refusal = Refusal(status, reason)


def request_path(buffered: bytes | bytearray) -> str:
    """The path of the request line at the start of `buffered`, without its query; "" when
    there is none to read."""
    end = buffered.find(CRLF)
    line = bytes(buffered if end < 0 else buffered[:end])
    parts = line.split(b" ")
    if len(parts) != 3:
        return ""
    return parts[1].split(b"?", 1)[0].decode("ascii", "replace")
