"""A WATCH read as the API writes it: one JSON event per line, each line bounded.

The client's `kubernetes.watch.Watch` decodes every event into its model classes (a V1Node per
heartbeat of every node) and keeps the raw object beside it; here an event is decoded once, to
the dicts the API sent. An ERROR event (a 410 Expired above all) is raised as the `ApiException`
the rest of the client raises, so `api_errors.is_gone` reads both alike.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import suppress
from typing import Any

from kubernetes.client.exceptions import ApiException

# etcd refuses objects over 1.5 MiB by default; an event line is one object and a few words.
MAX_EVENT_BYTES = 8 * 1024 * 1024
READ_BYTES = 64 * 1024

WatchEvent = tuple[str, Mapping[str, Any]]


class EventTooLarge(Exception):
    """A watch line past `MAX_EVENT_BYTES`."""


class WatchStream:
    """One open WATCH of what `list_call` (a `CoreV1Api.list_*` method) lists, from `version`.
    `close()` may come from another thread: it ends a read that waits on a silent watch."""

    def __init__(
        self,
        list_call: Callable[..., Any],
        version: str,
        *,
        timeout_seconds: int,
        request_timeout: tuple[float, float],
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        self._max_event_bytes = max_event_bytes
        self._closed = threading.Event()
        self._response = list_call(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _preload_content=False,
            _request_timeout=request_timeout,
        )

    def events(self) -> Iterator[WatchEvent]:
        """Each event's type and object until the server ends the watch or `close()`."""
        pending = bytearray()
        scanned = 0
        for chunk in self._response.stream(READ_BYTES, decode_content=True):
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", max(scanned, start))) >= 0:
                if end - start > self._max_event_bytes:
                    raise EventTooLarge(
                        f"a watch event is larger than {self._max_event_bytes} bytes"
                    )
                line = bytes(pending[start:end])
                start = end + 1
                if line.strip():
                    yield _event(line)
            del pending[:start]
            scanned = len(pending)
            if scanned > self._max_event_bytes:
                raise EventTooLarge(f"a watch event is larger than {self._max_event_bytes} bytes")
        if pending.strip() and not self._closed.is_set():
            yield _event(bytes(pending))

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        # Wakes a read blocked on a silent watch in another thread, then drops the connection:
        # a watch cut short cannot go back to the pool.
        with suppress(Exception):
            self._response.shutdown()
        with suppress(Exception):
            self._response.close()


def _event(line: bytes) -> WatchEvent:
    event = json.loads(line)
    kind = event.get("type") if isinstance(event, Mapping) else None
    obj = event.get("object") if isinstance(event, Mapping) else None
    if not isinstance(kind, str) or not isinstance(obj, Mapping):
        raise ValueError("a watch event without a type and an object")
    if kind == "ERROR":
        code = obj.get("code")
        status = code if isinstance(code, int) else 500
        raise ApiException(status=status, reason=str(obj.get("message") or obj.get("reason")))
    return kind, obj
