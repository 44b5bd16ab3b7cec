"""When the evented front hands a request on: whole, whatever its framing (a Content-Length,
a chunked body, a head that waits for `100 Continue`), or refused there with a status."""

from __future__ import annotations

import re

import pytest

from webhook.server.edge.request_framing import (
    Arrival,
    FramingLimits,
    RequestArrival,
    request_path,
)
from webhook.server.settings import Settings, SettingsError

HEAD = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
CHUNKED = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
LIMITS = FramingLimits(max_head_bytes=200, max_body_bytes=1024, max_chunks=4)
WHOLE, MORE = Arrival.WHOLE, Arrival.MORE


def arrival_of(buffered: bytes) -> tuple[Arrival, int | None]:
    arrival = RequestArrival(LIMITS)
    state = arrival.advance(buffered)
    return state, arrival.refusal.status if arrival.refusal else None


@pytest.mark.parametrize(
    ("buffered", "expected"),
    [
        pytest.param(b"", (MORE, None), id="nothing yet"),
        pytest.param(b"POST /mutate HTTP/1.1\r\nHost:", (MORE, None), id="half a head"),
        pytest.param(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", (WHOLE, None), id="no body"),
        pytest.param(HEAD + b"Content-Length: 4\r\n\r\n{}", (MORE, None), id="half a body"),
        pytest.param(HEAD + b"Content-Length: 2\r\n\r\n{}", (WHOLE, None), id="whole body"),
        pytest.param(HEAD + b"content-length:2 \r\n\r\n{}", (WHOLE, None), id="any case"),
        pytest.param(
            HEAD + b"Content-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\n", (WHOLE, None), id="pipelined"
        ),
        pytest.param(CHUNKED, (MORE, None), id="chunked head alone"),
        pytest.param(CHUNKED + b"2\r\n{}\r\n", (MORE, None), id="chunked, no last chunk"),
        pytest.param(CHUNKED + b"2\r\n{}\r\n0\r\n", (MORE, None), id="chunked, no end line"),
        pytest.param(CHUNKED + b"2\r\n{}\r\n0\r\n\r\n", (WHOLE, None), id="chunked whole"),
        pytest.param(
            CHUNKED + b"2;ext=1\r\n{}\r\n0\r\nX-T: 1\r\n\r\n", (WHOLE, None), id="trailers"
        ),
        pytest.param(CHUNKED + b"0\r\nX-T: 1\r\n", (MORE, None), id="half the trailers"),
        pytest.param(CHUNKED + b"zz\r\n{}\r\n", (Arrival.REFUSED, 400), id="a size not hex"),
        pytest.param(CHUNKED + b"2\r\n{}!!", (Arrival.REFUSED, 400), id="a chunk overrun"),
        pytest.param(CHUNKED + b"2 \r\n{}\r\n", (Arrival.REFUSED, 400), id="a space, no extension"),
        pytest.param(CHUNKED + b"2;\x01\r\n{}\r\n", (Arrival.REFUSED, 400), id="a bad extension"),
        pytest.param(
            CHUNKED + b"0\r\nX-T: 1\nX-U: 2\r\n\r\n", (Arrival.REFUSED, 400), id="a bare LF trailer"
        ),
        pytest.param(CHUNKED + b"401\r\n", (Arrival.REFUSED, 413), id="a chunk over the limit"),
        pytest.param(CHUNKED + b"1\r\nx\r\n" * 5, (Arrival.REFUSED, 413), id="too many chunks"),
        pytest.param(
            HEAD + b"Expect: 100-continue\r\nContent-Length: 9\r\n\r\n", (MORE, None), id="expect"
        ),
        pytest.param(
            HEAD + b"Content-Length: 2000\r\n\r\n", (Arrival.REFUSED, 413), id="over the limit"
        ),
        pytest.param(b"X" * 201, (Arrival.REFUSED, 431), id="head over its limit"),
        pytest.param(
            HEAD + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
            (Arrival.REFUSED, 400),
            id="two lengths",
        ),
        pytest.param(
            HEAD + b"Content-Length: 2, 2\r\n\r\n{}", (Arrival.REFUSED, 400), id="a length list"
        ),
        pytest.param(
            HEAD + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
            (Arrival.REFUSED, 400),
            id="smuggling pair",
        ),
        pytest.param(
            HEAD + b"Transfer-Encoding: gzip, chunked\r\n\r\n",
            (Arrival.REFUSED, 501),
            id="a coding not served",
        ),
        pytest.param(
            HEAD + b"Transfer-Encoding : chunked\r\n\r\n",
            (Arrival.REFUSED, 400),
            id="whitespace before the colon",
        ),
        pytest.param(
            HEAD + b"X-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n",
            (Arrival.REFUSED, 400),
            id="a folded line",
        ),
        # A header value that merely mentions the words is no such header.
        pytest.param(
            HEAD + b"X-Note: transfer-encoding: chunked\r\nContent-Length: 1\r\n\r\n",
            (MORE, None),
            id="words inside a value",
        ),
    ],
)
def test_when_a_request_is_whole_or_refused(
    buffered: bytes, expected: tuple[Arrival, int | None]
) -> None:
    assert arrival_of(buffered) == expected


def test_a_chunked_body_arriving_a_byte_at_a_time_is_whole_exactly_at_its_end() -> None:
    request = CHUNKED + b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    arrival = RequestArrival(LIMITS)
    states = [arrival.advance(request[:end]) for end in range(1, len(request) + 1)]
    assert states[:-1] == [MORE] * (len(request) - 1)
    assert states[-1] is WHOLE


@pytest.mark.parametrize(
    ("head", "due"),
    [
        pytest.param(HEAD + b"Expect: 100-continue\r\nContent-Length: 9\r\n\r\n", True, id="1.1"),
        pytest.param(
            HEAD + b"expect:  100-CONTINUE \r\nTransfer-Encoding: chunked\r\n\r\n",
            True,
            id="chunked, any case",
        ),
        pytest.param(
            b"POST /mutate HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n",
            False,
            id="HTTP/1.0 ignores it",
        ),
        pytest.param(HEAD + b"Expect: 100-continue\r\n\r\n", False, id="no body to wait for"),
        pytest.param(
            b"\r\n" + HEAD + b"Expect: 100-continue\r\nContent-Length: 9\r\n\r\n",
            True,
            id="after an empty line, which is ignored",
        ),
        pytest.param(HEAD + b"Content-Length: 9\r\n\r\n", False, id="not asked"),
    ],
)
def test_a_continue_is_due_only_where_a_body_waits_for_it(head: bytes, due: bool) -> None:
    arrival = RequestArrival(LIMITS)
    arrival.advance(head)
    assert arrival.continue_due is due


def test_a_continued_request_is_handed_on_without_its_expectation() -> None:
    head = HEAD + b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    arrival = RequestArrival(LIMITS)
    assert arrival.advance(head + b"{}") is WHOLE
    assert arrival.without_expectation(head + b"{}") == HEAD + b"Content-Length: 2\r\n\r\n{}"


@pytest.mark.parametrize(
    ("buffered", "path"),
    [
        (HEAD, "/mutate"),
        (b"POST /validate?timeout=10s HTTP/1.1\r\nHost: x\r\n", "/validate"),
        (b"POST /m\xffx HTTP/1.1\r\n", "/m\ufffdx"),
        (b"garbage\r\n", ""),
        (b"POST /mutate HTTP/1.1", "/mutate"),
        (b"", ""),
    ],
)
def test_the_path_of_a_refused_request_is_read_from_its_request_line(
    buffered: bytes, path: str
) -> None:
    assert request_path(buffered) == path


def test_the_front_and_its_limits_are_settings() -> None:
    defaults = Settings.from_environ({})
    assert (defaults.front, defaults.first_bytes_seconds, defaults.request_seconds) == (
        "evented",
        1.0,
        10.0,
    )
    assert defaults.max_connections == 500
    chosen = Settings.from_environ(
        {"FRONT": "threads", "FIRST_BYTES_SECONDS": "2.5", "MAX_CONNECTIONS": "64"}
    )
    assert (chosen.front, chosen.first_bytes_seconds, chosen.max_connections) == (
        "threads",
        2.5,
        64,
    )
    for environ, fragment in (
        ({"FRONT": "gevent"}, "is not one of evented, threads"),
        ({"FIRST_BYTES_SECONDS": "0"}, "a limit is needed here"),
        ({"REQUEST_SECONDS": "-1"}, "must be 0 (off) or a positive number"),
        ({"MAX_CONNECTIONS": "0"}, "must be at least 1"),
    ):
        with pytest.raises(SettingsError, match=re.escape(fragment)):
            Settings.from_environ(environ)
