"""A LIST and WATCH of one kind of object, kept up on a thread until stopped.

The handler gets what `keep` makes of each object (the little its owner reads, so that what is
held grows with that and not with the objects): the whole list after every LIST, which comes in
pages (`paged_list`), and each ADDED, MODIFIED or DELETED object of the watch (`watch_stream`).
Neither goes through the client's model classes. A watch that expires (410 Gone) is followed by
a new LIST at once (a second one in a row after the backoff), and so is a `relist()` the owner
asks for; any other failure, an empty watch the server closed at once included, by a LIST after
a capped, jittered backoff. An outage is
logged once when it starts and once when it ends.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from webhook.kube.api_errors import is_gone, short_reason
from webhook.kube.paged_list import PAGE_SIZE, list_in_pages
from webhook.kube.watch_stream import WatchStream

log = logging.getLogger("webhook")

CONNECT_TIMEOUT = 5.0
LIST_READ_TIMEOUT = 60.0
# A watch closes itself after `watch_timeout`; one that stays silent this long past that is dead.
WATCH_READ_SLACK = 30.0
SHORT_WATCH = 1.0
# How long stop() waits for an informer's thread.
STOP_TIMEOUT = 2.0

KubeObject = Mapping[str, Any]
Kept = TypeVar("Kept")
Held = TypeVar("Held")


class InformerHandler(Protocol[Held]):
    def listed(self, objects: list[Held]) -> None:
        """Every object as a LIST found them: what was held before is replaced."""

    def changed(self, event_type: str, obj: Held) -> None:
        """One ADDED, MODIFIED or DELETED object of the watch."""


@dataclass(frozen=True)
class Backoff:
    """Exponential, capped and jittered waits between failed LIST/WATCH attempts."""

    initial: float = 0.5
    maximum: float = 30.0

    def delay(self, failures: int) -> float:
        ceiling = min(self.maximum, self.initial * 2 ** max(failures - 1, 0))
        # Jitter keeps the workers of every replica from retrying in step after an outage.
        return random.uniform(ceiling / 2, ceiling)


class ShortWatch(Exception):
    """A watch the server closed at once without an event."""


class Informer(Generic[Kept]):
    """Calls `handler` with what `keep` makes of what `list_call` (a `CoreV1Api.list_*` method)
    lists and watches; an object `keep` makes None of is left out. `what` names the objects in
    log lines. Start it in the process that uses it: a thread does not survive a fork."""

    def __init__(
        self,
        list_call: Callable[..., Any],
        handler: InformerHandler[Kept],
        *,
        keep: Callable[[KubeObject], Kept | None],
        what: str,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._list_call = list_call
        self._handler = handler
        self._keep = keep
        self._what = what
        self._watch_timeout = watch_timeout
        self._backoff = backoff or Backoff()
        self._page_size = page_size
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._relist_wanted = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: WatchStream | None = None
        self._failures = 0

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"the {self._what} informer is already started")
        self._thread = threading.Thread(
            target=self._run, name=f"{self._what.replace(' ', '-')}-informer", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Ask the thread to stop and wait for it at most `timeout` seconds."""
        self._stopping.set()
        thread = self._thread
        deadline = time.monotonic() + timeout
        while thread is not None and thread.is_alive() and time.monotonic() < deadline:
            # A watch opened after the first look is closed by a later one.
            self._close_watch()
            thread.join(0.02)

    def relist(self) -> None:
        """Ask for a new LIST (the owner keeps other things of each object now): the watch
        ends, and a LIST under way is done again once it ends, its result unused."""
        self._relist_wanted.set()
        self._close_watch()

    def _close_watch(self) -> None:
        current = self._watch
        if current is not None:
            current.close()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first LIST reached the handler, False if `timeout` passes first."""
        return self._synced.wait(timeout)

    def _run(self) -> None:
        in_outage = False
        while not self._stopping.is_set():
            try:
                listed = self._list_and_hand_on()
                if listed is None:
                    continue
                version, count = listed
                if in_outage:
                    in_outage = False
                    log.info("%s: the Kubernetes API answers again (%d listed)", self._what, count)
                while not self._stopping.is_set() and not self._relist_wanted.is_set():
                    version = self._watch_from(version)
            except Exception as error:
                if self._stopping.is_set():
                    return
                if self._relist_wanted.is_set():
                    continue  # the watch that relist() closed
                self._failures += 1
                if is_gone(error):
                    log.debug("%s: watch expired (%s), listing again", self._what, error)
                    if self._failures == 1:
                        continue
                elif not in_outage:
                    in_outage = True
                    log.warning(
                        "%s: the Kubernetes API failed (%s); keeping what was last seen and "
                        "retrying",
                        self._what,
                        short_reason(error),
                    )
                else:
                    log.debug("%s: retry failed: %s", self._what, short_reason(error))
                self._stopping.wait(self._backoff.delay(self._failures))

    def _list_and_hand_on(self) -> tuple[str, int] | None:
        """List, and hand the list on; None when a `relist()` came meanwhile."""
        self._relist_wanted.clear()
        listed = list_in_pages(
            self._list_call,
            self._keep,
            request_timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT),
            page_size=self._page_size,
        )
        if self._relist_wanted.is_set():
            return None
        self._handler.listed(listed.items)
        self._synced.set()
        return listed.resource_version, len(listed.items)

    def _watch_from(self, version: str) -> str:
        """Hand on watch events until the server closes the watch; the version to resume from."""
        stream = WatchStream(
            self._list_call,
            version,
            timeout_seconds=self._watch_timeout,
            request_timeout=(CONNECT_TIMEOUT, self._watch_timeout + WATCH_READ_SLACK),
        )
        self._watch = stream
        if self._stopping.is_set() or self._relist_wanted.is_set():
            stream.close()  # stop() or relist() looked before the watch was there
        opened = time.monotonic()
        received = False
        try:
            for event_type, obj in stream.events():
                if self._stopping.is_set() or self._relist_wanted.is_set():
                    break
                if event_type in ("ADDED", "MODIFIED", "DELETED"):
                    kept = self._keep(obj)
                    if kept is not None:
                        self._handler.changed(event_type, kept)
                # A BOOKMARK carries only the version to resume from.
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                received = True
                self._failures = 0
        finally:
            self._watch = None
            stream.close()
        closed_here = self._stopping.is_set() or self._relist_wanted.is_set()
        if not received and time.monotonic() - opened < SHORT_WATCH and not closed_here:
            # As client-go does: a watch closed at once and empty is a failure, so it backs off.
            raise ShortWatch(f"the watch closed after {time.monotonic() - opened:.2f} s, empty")
        self._failures = 0
        return version


class InformerBacked:
    """What a cache kept by an informer shares: it owns `_api_client`, which `stop()` closes,
    and `_informer`, which its subclass builds. Build one per process: after a fork the
    informer thread is gone."""

    _api_client: Any
    _informer: Informer

    def start(self) -> None:
        self._informer.start()

    def stop(self) -> None:
        """Stop the informer and close the client; returns within about two seconds."""
        self._informer.stop(STOP_TIMEOUT)
        self._api_client.close()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first LIST reached the cache, False if `timeout` passes first."""
        return self._informer.wait_synced(timeout)
