"""A LIST and WATCH of one kind of object, kept up on a thread until stopped.

The handler gets the whole list after every LIST and each ADDED, MODIFIED or DELETED object of
the watch, as the API encodes them (dicts, never the client's model classes). A watch that
expires (410 Gone) is followed by a new LIST at once; any other failure, an empty watch the
server closed at once included, by a LIST after a capped, jittered backoff. An outage is logged
once when it starts and once when it ends.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import watch

from webhook.kube.api_errors import is_gone, short_reason

log = logging.getLogger("webhook")

CONNECT_TIMEOUT = 5.0
LIST_READ_TIMEOUT = 60.0
# A watch closes itself after `watch_timeout`; one that stays silent this long past that is dead.
WATCH_READ_SLACK = 30.0
SHORT_WATCH = 1.0
# How long stop() waits for an informer's thread.
STOP_TIMEOUT = 2.0

KubeObject = Mapping[str, Any]


class InformerHandler(Protocol):
    def listed(self, objects: list[KubeObject]) -> None:
        """Every object as a LIST found them: what was held before is replaced."""

    def changed(self, event_type: str, obj: KubeObject) -> None:
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


class Informer:
    """Calls `handler` with what `list_call` (a `CoreV1Api.list_*` method) lists and watches.
    `what` names the objects in log lines. Start it in the process that uses it: a thread does
    not survive a fork."""

    def __init__(
        self,
        list_call: Callable[..., Any],
        handler: InformerHandler,
        *,
        what: str,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
    ) -> None:
        self._list_call = list_call
        self._handler = handler
        self._what = what
        self._watch_timeout = watch_timeout
        self._backoff = backoff or Backoff()
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None
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
            # Watch.stream() forgets a stop() that comes before its request, so repeat it.
            current = self._watch
            if current is not None:
                current.stop()
            thread.join(0.02)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first LIST reached the handler, False if `timeout` passes first."""
        return self._synced.wait(timeout)

    def _run(self) -> None:
        in_outage = False
        while not self._stopping.is_set():
            try:
                version, count = self._relist()
                if in_outage:
                    in_outage = False
                    log.info("%s: the Kubernetes API answers again (%d listed)", self._what, count)
                while not self._stopping.is_set():
                    version = self._watch_from(version)
            except Exception as error:
                if self._stopping.is_set():
                    return
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

    def _relist(self) -> tuple[str, int]:
        response = self._list_call(
            _preload_content=False, _request_timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT)
        )
        listing = json.loads(response.data)
        items = [item for item in listing.get("items") or [] if isinstance(item, Mapping)]
        self._handler.listed(items)
        self._synced.set()
        return listing["metadata"]["resourceVersion"], len(items)

    def _watch_from(self, version: str) -> str:
        """Hand on watch events until the server closes the watch; the version to resume from."""
        stream = watch.Watch()
        self._watch = stream
        opened = time.monotonic()
        received = False
        events: Generator[dict[str, Any], None, None] = stream.stream(
            self._list_call,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout,
            _request_timeout=(CONNECT_TIMEOUT, self._watch_timeout + WATCH_READ_SLACK),
        )
        try:
            for event in events:
                if self._stopping.is_set():
                    break
                obj = event["raw_object"]
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    self._handler.changed(event["type"], obj)
                # A BOOKMARK carries only the version to resume from.
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                received = True
                self._failures = 0
        finally:
            events.close()
            self._watch = None
        if not received and time.monotonic() - opened < SHORT_WATCH and not self._stopping.is_set():
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
