"""When the evented front hands a request on: whole (head and Content-Length body), or at its
head for what gunicorn must answer itself."""

from __future__ import annotations

import re

import pytest

from webhook.server.settings import Settings, SettingsError
from webhook.server.worker.front import Framing, framing, request_path

HEAD = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize(
    ("buffered", "expected"),
    [
        pytest.param(b"", Framing.MORE, id="nothing yet"),
        pytest.param(b"POST /mutate HTTP/1.1\r\nHost:", Framing.MORE, id="half a head"),
        pytest.param(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n", Framing.WHOLE, id="no body"),
        pytest.param(HEAD + b"Content-Length: 4\r\n\r\n{}", Framing.MORE, id="half a body"),
        pytest.param(HEAD + b"Content-Length: 2\r\n\r\n{}", Framing.WHOLE, id="whole body"),
        pytest.param(HEAD + b"content-length:2 \r\n\r\n{}", Framing.WHOLE, id="any case, spaces"),
        pytest.param(
            HEAD + b"Content-Length: 2\r\n\r\n{}GET / HTTP/1.1\r\n", Framing.WHOLE, id="pipelined"
        ),
        pytest.param(
            HEAD + b"Transfer-Encoding: chunked\r\n\r\n", Framing.AT_HEAD, id="chunked at head"
        ),
        pytest.param(
            HEAD + b"Expect: 100-continue\r\nContent-Length: 9\r\n\r\n",
            Framing.AT_HEAD,
            id="expect at head",
        ),
        pytest.param(
            HEAD + b"Content-Length: 99999999999\r\n\r\n",
            Framing.TOO_LARGE,
            id="over the body limit",
        ),
        pytest.param(b"X" * 101, Framing.AT_HEAD, id="head over its limit"),
        # A header value that merely mentions the words is no such header.
        pytest.param(
            HEAD + b"X-Note: transfer-encoding: chunked\r\nContent-Length: 1\r\n\r\n",
            Framing.MORE,
            id="words inside a value",
        ),
    ],
)
def test_framing(buffered: bytes, expected: Framing) -> None:
    assert (
        framing(
            buffered, max_head_bytes=100 if buffered == b"X" * 101 else 4096, max_body_bytes=1024
        )
        is expected
    )


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
