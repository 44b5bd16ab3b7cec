"""A WATCH read as newline-delimited JSON: events in order however the bytes are chunked, an
ERROR event raised as the client's ApiException, each line bounded, and a close from another
thread that ends the connection once."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from webhook.kube.api_errors import is_gone
from webhook.kube.watch_stream import READ_BYTES, EventTooLarge, WatchStream

TIMEOUT = (1.0, 2.0)


class FakeWatchResponse:
    """An HTTP answer not preloaded whose body arrives as `chunks`."""

    def __init__(self, chunks: Sequence[bytes], *, failing_shutdown: bool = False) -> None:
        self._chunks = list(chunks)
        self._failing_shutdown = failing_shutdown
        self.streamed: list[tuple[int, bool]] = []
        self.shutdowns = 0
        self.closes = 0

    def stream(self, amount: int, decode_content: bool = False) -> Iterator[bytes]:
        self.streamed.append((amount, decode_content))
        yield from self._chunks

    def shutdown(self) -> None:
        self.shutdowns += 1
        if self._failing_shutdown:
            raise OSError("already shut")

    def close(self) -> None:
        self.closes += 1


class FakeList:
    """A `CoreV1Api.list_*` method that records its arguments and answers `response`."""

    def __init__(self, response: FakeWatchResponse) -> None:
        self.response = response
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> FakeWatchResponse:
        self.calls.append(kwargs)
        return self.response


def watch(chunks: Sequence[bytes], max_event_bytes: int = 1024) -> WatchStream:
    listing = FakeList(FakeWatchResponse(chunks))
    return WatchStream(
        listing,
        "42",
        timeout_seconds=300,
        request_timeout=TIMEOUT,
        max_event_bytes=max_event_bytes,
    )


def line(kind: str, name: str, version: str = "1") -> bytes:
    node = {"kind": "Node", "metadata": {"name": name, "resourceVersion": version}}
    return json.dumps({"type": kind, "object": node}).encode() + b"\n"


def error_line(status: dict[str, Any]) -> bytes:
    return json.dumps({"type": "ERROR", "object": {"kind": "Status", **status}}).encode() + b"\n"


ADDED = line("ADDED", "a", "10")
MODIFIED = line("MODIFIED", "b", "11")
DELETED = line("DELETED", "a", "12")
BOOKMARK = (
    json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}}).encode()
    + b"\n"
)
WHOLE = ADDED + MODIFIED + DELETED + BOOKMARK
EXPECTED = [
    ("ADDED", {"kind": "Node", "metadata": {"name": "a", "resourceVersion": "10"}}),
    ("MODIFIED", {"kind": "Node", "metadata": {"name": "b", "resourceVersion": "11"}}),
    ("DELETED", {"kind": "Node", "metadata": {"name": "a", "resourceVersion": "12"}}),
    ("BOOKMARK", {"metadata": {"resourceVersion": "13"}}),
]


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param([ADDED, MODIFIED, DELETED, BOOKMARK], id="one per chunk"),
        pytest.param([WHOLE], id="several events in one chunk"),
        pytest.param(
            [
                ADDED[:5],
                ADDED[5:20],
                ADDED[20:] + MODIFIED[:3],
                MODIFIED[3:],
                DELETED + BOOKMARK[:9],
                BOOKMARK[9:],
            ],
            id="events split across chunks",
        ),
        pytest.param([bytes([byte]) for byte in WHOLE], id="one byte per chunk"),
        pytest.param(
            [b"\n", ADDED, b"\n\n  \n", MODIFIED + b"\r\n" + DELETED, b"\n" + BOOKMARK.rstrip()],
            id="blank lines and a last event without its newline",
        ),
        pytest.param([b"", ADDED + MODIFIED, b"", DELETED, BOOKMARK], id="empty chunks"),
    ],
)
def test_events_are_decoded_in_order_with_type_and_object(chunks: list[bytes]) -> None:
    assert list(watch(chunks).events()) == EXPECTED


def test_an_empty_watch_has_no_events() -> None:
    assert list(watch([]).events()) == []


@pytest.mark.parametrize(
    ("status", "code"),
    [
        pytest.param({"code": 410, "reason": "Expired", "message": "too old"}, 410, id="410"),
        pytest.param({"code": 500, "message": "etcd"}, 500, id="500"),
        pytest.param({"message": "no code"}, 500, id="no code reads as 500"),
        pytest.param({"code": "410", "message": "a string"}, 500, id="a string code reads as 500"),
    ],
)
def test_an_error_event_raises_api_exception_with_the_status_code(
    status: dict[str, Any], code: int
) -> None:
    events = watch([ADDED, error_line(status), MODIFIED]).events()
    assert next(events)[0] == "ADDED"
    with pytest.raises(ApiException) as raised:
        next(events)
    assert raised.value.status == code
    assert is_gone(raised.value) is (code == 410)


def test_an_error_event_raises_with_the_status_message() -> None:
    events = watch([error_line({"code": 410, "message": "too old resource version"})]).events()
    with pytest.raises(ApiException, match="too old resource version"):
        list(events)


LONG = line("ADDED", "n" * 200)


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param([LONG[:16], LONG[16:64], LONG[64:150], LONG[150:]], id="in small chunks"),
        pytest.param([LONG[:150]], id="with no newline yet"),
        pytest.param([ADDED + LONG[:150]], id="after a whole event in the same chunk"),
        pytest.param([LONG], id="whole in one chunk"),
        pytest.param([LONG[:90], LONG[90:]], id="in two chunks each under the limit"),
    ],
)
def test_a_line_past_max_event_bytes_raises_event_too_large(chunks: list[bytes]) -> None:
    assert len(LONG) > 200
    with pytest.raises(EventTooLarge):
        list(watch(chunks, max_event_bytes=100).events())


def test_a_line_at_max_event_bytes_is_decoded() -> None:
    events = list(watch([LONG[:50], LONG[50:]], max_event_bytes=len(LONG)).events())
    assert [kind for kind, _ in events] == ["ADDED"]


def test_the_watch_asks_for_bookmarks_from_the_version_with_a_timeout() -> None:
    listing = FakeList(FakeWatchResponse([ADDED]))
    stream = WatchStream(listing, "4711", timeout_seconds=290, request_timeout=TIMEOUT)
    assert listing.calls == [
        {
            "watch": True,
            "resource_version": "4711",
            "allow_watch_bookmarks": True,
            "timeout_seconds": 290,
            "_preload_content": False,
            "_request_timeout": TIMEOUT,
        }
    ]
    list(stream.events())
    assert listing.response.streamed == [(READ_BYTES, True)]


@pytest.mark.parametrize("failing_shutdown", [False, True], ids=["shutdown", "failing shutdown"])
def test_close_shuts_down_and_closes_the_response_once(failing_shutdown: bool) -> None:
    response = FakeWatchResponse([ADDED], failing_shutdown=failing_shutdown)
    stream = WatchStream(FakeList(response), "1", timeout_seconds=1, request_timeout=TIMEOUT)
    stream.close()
    stream.close()
    assert (response.shutdowns, response.closes) == (1, 1)


def test_a_partial_line_left_when_the_watch_is_closed_is_not_decoded() -> None:
    stream = watch([ADDED, MODIFIED[:10]])
    events = stream.events()
    assert next(events)[0] == "ADDED"
    stream.close()
    assert list(events) == []


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(b'{"object": {"kind": "Node"}}', id="no type"),
        pytest.param(b'{"type": "ADDED"}', id="no object"),
        pytest.param(b'{"type": 1, "object": {}}', id="a type that is not a string"),
        pytest.param(b'{"type": "ADDED", "object": "node"}', id="an object that is a string"),
        pytest.param(b'{"type": "ERROR", "object": null}', id="an error without its status"),
        pytest.param(b'["ADDED", {}]', id="a list"),
        pytest.param(b'{"type": "ADDED", "object": {', id="JSON cut short"),
    ],
)
def test_a_malformed_event_raises_value_error(event: bytes) -> None:
    events = watch([ADDED, event + b"\n", MODIFIED]).events()
    assert next(events)[0] == "ADDED"
    with pytest.raises(ValueError):
        next(events)
