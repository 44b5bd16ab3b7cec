"""A LIST in pages, keeping only what the caller reads of each object.

A cluster's nodes do not fit one answer: at 100,000 nodes a single NodeList is over a GiB of
JSON, and its decoded objects several times that. Pages bound what is held at once to one page;
`keep` turns each object into the little its reader needs as the page arrives, so what the list
returns grows with that, not with the objects. A page holds `PAGE_SIZE` objects, a fifth of
client-go's 500: a GPU node is about 13 KiB of JSON, a decoded page of 500 of them about 30 MiB,
which was a quarter of the advertiser's peak; 100 a page cost no time in the benchmark. No
`resourceVersion` is sent: the apiserver then pages a consistent snapshot, which
`resourceVersion=0` (served whole from its cache by older versions) would not be.

A `continue` token outlives its snapshot only until etcd compacts it (five minutes by default),
after which the apiserver answers 410 Expired; the list then starts again from the first page,
as a reflector does, a bounded number of times.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from webhook.kube.api_errors import is_gone
from webhook.kube.bounded_read import read_at_most

PAGE_SIZE = 100
# A page of 100 nodes is about 1.3 MiB; one this large is not an answer the product can hold.
MAX_PAGE_BYTES = 32 * 1024 * 1024
# Fresh starts after an expired `continue` token, before the failure is the caller's.
EXPIRED_RESTARTS = 3

Kept = TypeVar("Kept")


@dataclass(frozen=True)
class Listed(Generic[Kept]):
    """What `keep` made of every object listed, and the version to watch from."""

    items: list[Kept]
    resource_version: str


class ListTooLarge(Exception):
    """A page past `MAX_PAGE_BYTES`."""


def list_in_pages(
    list_call: Callable[..., Any],
    keep: Callable[[Mapping[str, Any]], Kept | None],
    *,
    request_timeout: tuple[float, float],
    page_size: int = PAGE_SIZE,
    max_page_bytes: int = MAX_PAGE_BYTES,
) -> Listed[Kept]:
    """Every object `list_call` (a `CoreV1Api.list_*` method) lists, as `keep` makes it; None
    from `keep` drops the object. Raises what the client raises (a 410 only after
    `EXPIRED_RESTARTS` restarts), ListTooLarge for a page past `max_page_bytes`, and ValueError
    for a page that is not a list."""
    restarts = 0
    while True:
        try:
            return _one_pass(list_call, keep, request_timeout, page_size, max_page_bytes)
        except _ExpiredContinue as expired:
            restarts += 1
            if restarts > EXPIRED_RESTARTS:
                raise expired.error from None


class _ExpiredContinue(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _one_pass(
    list_call: Callable[..., Any],
    keep: Callable[[Mapping[str, Any]], Kept | None],
    request_timeout: tuple[float, float],
    page_size: int,
    max_page_bytes: int,
) -> Listed[Kept]:
    items: list[Kept] = []
    token = ""
    version: str | None = None
    while True:
        options: dict[str, Any] = {"limit": page_size}
        if token:
            options["_continue"] = token
        try:
            response = list_call(
                _preload_content=False, _request_timeout=request_timeout, **options
            )
        except Exception as error:
            if token and is_gone(error):
                raise _ExpiredContinue(error) from None
            raise
        try:
            body = read_at_most(response, max_page_bytes)
        finally:
            response.release_conn()
        if body is None:
            raise ListTooLarge(f"a page of the list is larger than {max_page_bytes} bytes")
        page = json.loads(body)
        del body
        metadata = page.get("metadata") or {}
        # Every page of one snapshot carries the snapshot's version; the first one is it.
        if version is None:
            version = metadata.get("resourceVersion")
            if not isinstance(version, str) or not version:
                # A watch from no version would start with every object again, as ADDED.
                raise ValueError("the list carries no metadata.resourceVersion")
        for item in page.get("items") or ():
            if isinstance(item, Mapping):
                kept = keep(item)
                if kept is not None:
                    items.append(kept)
        token = metadata.get("continue") or ""
        del page
        if not token:
            return Listed(items, version)
