"""A LIST read in pages: every page followed, each object kept as the caller makes it, the
snapshot's version returned, and an expired `continue` token answered by listing again."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from webhook.kube.paged_list import EXPIRED_RESTARTS, ListTooLarge, list_in_pages

TIMEOUT = (1.0, 2.0)
GONE = 410


class FakeResponse:
    """An HTTP answer not preloaded: its body read `chunk` bytes at most at a time."""

    def __init__(self, body: bytes, chunk: int) -> None:
        self._body = body
        self._chunk = chunk
        self.released = False

    def read(self, amount: int) -> bytes:
        taken = self._body[: min(amount, self._chunk)]
        self._body = self._body[len(taken) :]
        return taken

    def release_conn(self) -> None:
        self.released = True


Answer = Mapping[str, Any] | BaseException


class FakeList:
    """A `CoreV1Api.list_*` method answering each call with the next of `answers`: a page (as
    a dict, sent as JSON) or an error to raise."""

    def __init__(self, answers: Sequence[Answer], chunk: int = 7) -> None:
        self._answers = list(answers)
        self._chunk = chunk
        self.calls: list[dict[str, Any]] = []
        self.responses: list[FakeResponse] = []

    def __call__(self, **kwargs: Any) -> FakeResponse:
        self.calls.append(kwargs)
        answer = self._answers[len(self.calls) - 1]
        if isinstance(answer, BaseException):
            raise answer
        response = FakeResponse(json.dumps(answer).encode(), self._chunk)
        self.responses.append(response)
        return response

    @property
    def tokens(self) -> list[str | None]:
        return [call.get("_continue") for call in self.calls]


def page(names: Sequence[str], token: str = "", version: str | None = "100") -> dict[str, Any]:
    metadata: dict[str, Any] = {"continue": token} if token else {}
    if version is not None:
        metadata["resourceVersion"] = version
    return {
        "kind": "NodeList",
        "metadata": metadata,
        "items": [{"metadata": {"name": name}} for name in names],
    }


def name_of(item: Mapping[str, Any]) -> str:
    name: str = item["metadata"]["name"]
    return name


def gone() -> ApiException:
    return ApiException(status=GONE, reason="Expired")


def test_pages_are_followed_with_continue_and_limit() -> None:
    listing = FakeList([page(["a", "b"], "t1"), page(["c", "d"], "t2"), page(["e"])])
    listed = list_in_pages(listing, name_of, request_timeout=TIMEOUT, page_size=2)
    assert listed.items == ["a", "b", "c", "d", "e"]
    assert listing.calls == [
        {"_preload_content": False, "_request_timeout": TIMEOUT, "limit": 2},
        {"_preload_content": False, "_request_timeout": TIMEOUT, "limit": 2, "_continue": "t1"},
        {"_preload_content": False, "_request_timeout": TIMEOUT, "limit": 2, "_continue": "t2"},
    ]
    # Every page's connection goes back to the pool once its body is read.
    assert [response.released for response in listing.responses] == [True, True, True]


def test_keep_is_applied_to_every_item_and_none_drops_it() -> None:
    listing = FakeList([page(["a", "skip-b"], "t1"), page(["skip-c", "d"])])

    def keep(item: Mapping[str, Any]) -> str | None:
        name = name_of(item)
        return None if name.startswith("skip-") else name.upper()

    listed = list_in_pages(listing, keep, request_timeout=TIMEOUT)
    assert listed.items == ["A", "D"]


def test_items_that_are_not_objects_are_not_given_to_keep() -> None:
    odd = page(["a"])
    odd["items"] = ["not an object", None, {"metadata": {"name": "b"}}]
    seen: list[Mapping[str, Any]] = []

    def keep(item: Mapping[str, Any]) -> str:
        seen.append(item)
        return name_of(item)

    assert list_in_pages(FakeList([odd]), keep, request_timeout=TIMEOUT).items == ["b"]
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("pages", "version"),
    [
        pytest.param([page(["a"], version="7")], "7", id="one page"),
        pytest.param(
            [
                page(["a"], "t1", version="7"),
                page(["b"], "t2", version="8"),
                page(["c"], version="9"),
            ],
            "7",
            id="later pages carrying other versions",
        ),
    ],
)
def test_the_first_pages_resource_version_is_returned(
    pages: list[dict[str, Any]], version: str
) -> None:
    assert list_in_pages(FakeList(pages), name_of, request_timeout=TIMEOUT).resource_version == (
        version
    )


@pytest.mark.parametrize(
    "restarts",
    [pytest.param(count, id=f"{count} expired") for count in range(1, EXPIRED_RESTARTS + 1)],
)
def test_an_expired_continue_token_lists_again_from_the_first_page(restarts: int) -> None:
    expired_passes: list[Answer] = [page(["a"], "old", version="5"), gone()] * restarts
    listing = FakeList([*expired_passes, page(["a"], "new", version="6"), page(["b"])])
    listed = list_in_pages(listing, name_of, request_timeout=TIMEOUT)
    # What the expired passes kept is dropped: each object once, from the pass that finished.
    assert listed.items == ["a", "b"]
    assert listed.resource_version == "6"
    assert listing.tokens == [None, "old"] * restarts + [None, "new"]


def test_the_410_is_raised_after_expired_restarts_fresh_starts() -> None:
    listing = FakeList([page(["a"], "old"), gone()] * (EXPIRED_RESTARTS + 1))
    with pytest.raises(ApiException) as raised:
        list_in_pages(listing, name_of, request_timeout=TIMEOUT)
    assert raised.value.status == GONE
    assert listing.tokens == [None, "old"] * (EXPIRED_RESTARTS + 1)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(gone(), id="410 on the first page"),
        pytest.param(ApiException(status=500, reason="Internal"), id="500 on the first page"),
        pytest.param(OSError("connection refused"), id="connection refused"),
    ],
)
def test_an_error_on_the_first_page_is_raised_at_once(error: BaseException) -> None:
    listing = FakeList([error, page(["a"])])
    with pytest.raises(type(error)) as raised:
        list_in_pages(listing, name_of, request_timeout=TIMEOUT)
    assert raised.value is error
    assert len(listing.calls) == 1


def test_an_error_other_than_410_on_a_continued_page_is_raised_at_once() -> None:
    error = ApiException(status=500, reason="Internal")
    listing = FakeList([page(["a"], "t1"), error, page(["a"]), page(["b"])])
    with pytest.raises(ApiException) as raised:
        list_in_pages(listing, name_of, request_timeout=TIMEOUT)
    assert raised.value is error
    assert len(listing.calls) == 2


def body_size(answer: Mapping[str, Any]) -> int:
    return len(json.dumps(answer).encode())


@pytest.mark.parametrize(
    ("over_by", "too_large"),
    [
        pytest.param(0, False, id="a page exactly at the limit"),
        pytest.param(1, True, id="a page one byte past the limit"),
    ],
)
def test_a_page_past_max_page_bytes_raises_list_too_large(over_by: int, too_large: bool) -> None:
    first, second = page(["a"], "t1"), page(["b" * 50])
    listing = FakeList([first, second], chunk=16)
    limit = body_size(second) - over_by
    assert body_size(first) <= limit
    if too_large:
        with pytest.raises(ListTooLarge):
            list_in_pages(listing, name_of, request_timeout=TIMEOUT, max_page_bytes=limit)
    else:
        listed = list_in_pages(listing, name_of, request_timeout=TIMEOUT, max_page_bytes=limit)
        assert listed.items == ["a", "b" * 50]
    assert all(response.released for response in listing.responses)


def without_metadata(answer: dict[str, Any]) -> dict[str, Any]:
    del answer["metadata"]
    return answer


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(page(["a"], version=None), id="no resourceVersion"),
        pytest.param(page(["a"], version=""), id="an empty resourceVersion"),
        pytest.param({**page(["a"]), "metadata": {"resourceVersion": 7}}, id="a number"),
        pytest.param({**page(["a"]), "metadata": None}, id="null metadata"),
        pytest.param(without_metadata(page(["a"])), id="no metadata"),
    ],
)
def test_a_list_without_metadata_resource_version_raises_value_error(
    first: dict[str, Any],
) -> None:
    with pytest.raises(ValueError, match="resourceVersion"):
        list_in_pages(FakeList([first]), name_of, request_timeout=TIMEOUT)


def test_no_resource_version_is_ever_sent() -> None:
    listing = FakeList([page(["a"], "old"), gone(), page(["a"], "t1"), page(["b"], "t2"), page([])])
    list_in_pages(listing, name_of, request_timeout=TIMEOUT, page_size=1)
    assert len(listing.calls) == 5
    for call in listing.calls:
        assert not {"resource_version", "resourceVersion", "resource_version_match"} & set(call)
