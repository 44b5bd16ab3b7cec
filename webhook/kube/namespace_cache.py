"""The labels of every namespace, kept in memory by a LIST and WATCH of the Kubernetes API.

An admission asks `labels_of(name)`; a namespace the informer has seen answers from a dict. One
it has not seen yet (created a moment ago, or the informer has not listed yet) is read with one
short GET, shared by every admission that asks for it meanwhile. When the API fails, what the
cache holds keeps answering, and misses answer "unknown" at once for a few seconds instead of
each waiting on a dead API.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from webhook.policy.namespace_labels import LabelLookup

log = logging.getLogger("webhook")

HTTP_NOT_FOUND = 404
HTTP_GONE = 410
CONNECT_TIMEOUT = 5.0
LIST_READ_TIMEOUT = 60.0
# A watch closes itself after `watch_timeout`; one that stays silent this long past that is dead.
WATCH_READ_SLACK = 30.0
STOP_TIMEOUT = 2.0
SHORT_WATCH = 1.0
NO_ANSWER = "the Kubernetes API did not answer"


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


class _Flight:
    """One GET under way; the admissions that miss the same name meanwhile wait for it."""

    __slots__ = ("done", "result", "superseded")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result = LabelLookup.unknown(NO_ANSWER)
        # Set when the informer writes the name meanwhile: its answer is newer than the GET's.
        self.superseded = False


class NamespaceLabelCache:
    """A `NamespaceLabelSource` backed by an informer on the namespaces of one cluster.

    The cache owns `api_client` and closes it on `stop()`. A miss waits at most
    `lookup_timeout` for each attempt the client's retry policy allows (the clients of
    `webhook.kube.client_config` make one attempt). After a failed GET, misses
    answer unknown without asking for `failure_memory` seconds. Build one per process: after a
    fork the informer thread is gone.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        lookup_timeout: float = 1.0,
        failure_memory: float = 5.0,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api_client = api_client
        self._core = CoreV1Api(api_client)
        self._lookup_timeout = lookup_timeout
        self._failure_memory = failure_memory
        self._watch_timeout = watch_timeout
        self._backoff = backoff or Backoff()
        self._clock = clock

        # Read without the lock (a dict lookup is atomic); every write holds the lock.
        self._known: dict[str, LabelLookup] = {}
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._failure: tuple[float, LabelLookup] | None = None
        self._lookups_failing = False

        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None
        self._failures = 0

    # --- the admission side ----------------------------------------------------------------

    def labels_of(self, namespace: str) -> LabelLookup:
        found = self._known.get(namespace)
        if found is not None:
            return found
        failure = self._failure
        if failure is not None and self._clock() < failure[0]:
            return failure[1]
        return self._fetch_once(namespace)

    def cached(self, namespace: str) -> LabelLookup | None:
        """What the cache holds for `namespace`, without asking the API."""
        return self._known.get(namespace)

    def _fetch_once(self, namespace: str) -> LabelLookup:
        if not namespace:
            # read_namespace("") would ask for the namespace list instead.
            return LabelLookup.unknown("the object names no namespace")
        with self._lock:
            found = self._known.get(namespace)
            if found is not None:
                return found
            flight = self._flights.get(namespace)
            leader = flight is None
            if flight is None:
                flight = self._flights[namespace] = _Flight()
        if not leader:
            flight.done.wait()
            return flight.result
        try:
            flight.result = self._fetch(namespace, flight)
        finally:
            with self._lock:
                del self._flights[namespace]
            flight.done.set()
        return flight.result

    def _fetch(self, namespace: str, flight: _Flight) -> LabelLookup:
        try:
            found = self._core.read_namespace(namespace, _request_timeout=self._lookup_timeout)
            lookup = LabelLookup.known(_labels_of_model(found))
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return LabelLookup.unknown(f"namespace {namespace} does not exist")
            return self._remember_failure(error)
        except Exception as error:  # whatever breaks, the admission gets an answer
            return self._remember_failure(error)
        with self._lock:
            self._lookups_failing = False
            if not flight.superseded:
                self._known[namespace] = lookup
            return self._known.get(namespace, lookup)

    def _remember_failure(self, error: BaseException) -> LabelLookup:
        reason = short_reason(error)
        lookup = LabelLookup.unknown(f"{NO_ANSWER}: {reason}")
        with self._lock:
            first = not self._lookups_failing
            self._lookups_failing = True
            self._failure = (self._clock() + self._failure_memory, lookup)
        if first:
            log.warning(
                "namespace labels: a lookup failed (%s); namespaces not cached are matched "
                "by name alone, asking again every %g s",
                reason,
                self._failure_memory,
            )
        return lookup

    # --- the informer ----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the namespace label cache is already started")
        self._thread = threading.Thread(
            target=self._run, name="namespace-label-informer", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the informer and close the client; returns within about two seconds."""
        self._stopping.set()
        thread = self._thread
        deadline = time.monotonic() + STOP_TIMEOUT
        while thread is not None and thread.is_alive() and time.monotonic() < deadline:
            # Watch.stream() forgets a stop() that comes before its request, so repeat it.
            current = self._watch
            if current is not None:
                current.stop()
            thread.join(0.02)
        self._api_client.close()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the first LIST is in the cache, False if `timeout` passes first."""
        return self._synced.wait(timeout)

    def _run(self) -> None:
        in_outage = False
        while not self._stopping.is_set():
            try:
                version = self._relist()
                if in_outage:
                    in_outage = False
                    log.info(
                        "namespace labels: the Kubernetes API answers again (%d namespaces)",
                        len(self._known),
                    )
                while not self._stopping.is_set():
                    version = self._watch_from(version)
            except Exception as error:
                if self._stopping.is_set():
                    return
                self._failures += 1
                if _is_gone(error):
                    log.debug("namespace labels: watch expired (%s), listing again", error)
                    if self._failures == 1:
                        continue
                elif not in_outage:
                    in_outage = True
                    log.warning(
                        "namespace labels: the Kubernetes API failed (%s); serving the %d "
                        "namespaces in the cache and retrying",
                        short_reason(error),
                        len(self._known),
                    )
                else:
                    log.debug("namespace labels: retry failed: %s", short_reason(error))
                self._stopping.wait(self._backoff.delay(self._failures))

    def _relist(self) -> str:
        listing = self._core.list_namespace(_request_timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT))
        fresh = {
            item.metadata.name: LabelLookup.known(_labels_of_model(item))
            for item in listing.items
            if item.metadata is not None and item.metadata.name
        }
        with self._lock:
            self._known = fresh
            self._failure = None
            for flight in self._flights.values():
                flight.superseded = True
        self._synced.set()
        return listing.metadata.resource_version

    def _watch_from(self, version: str) -> str:
        """Apply watch events until the server closes the watch; the version to resume from."""
        stream = watch.Watch()
        self._watch = stream
        opened = time.monotonic()
        received = False
        events: Generator[dict[str, Any], None, None] = stream.stream(
            self._core.list_namespace,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self._watch_timeout,
            _request_timeout=(CONNECT_TIMEOUT, self._watch_timeout + WATCH_READ_SLACK),
        )
        try:
            for event in events:
                if self._stopping.is_set():
                    break
                version = self._apply(event["type"], event["raw_object"]) or version
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

    def _apply(self, kind: str, obj: Mapping[str, Any]) -> str | None:
        metadata = obj.get("metadata") or {}
        name = metadata.get("name")
        if name and kind in ("ADDED", "MODIFIED"):
            self._write(name, LabelLookup.known(metadata.get("labels") or {}))
        elif name and kind == "DELETED":
            self._write(name, None)
        # A BOOKMARK carries only the version to resume from.
        return metadata.get("resourceVersion")

    def _write(self, name: str, lookup: LabelLookup | None) -> None:
        with self._lock:
            if lookup is None:
                self._known.pop(name, None)
            else:
                self._known[name] = lookup
            flight = self._flights.get(name)
            if flight is not None:
                flight.superseded = True


def _labels_of_model(namespace: Any) -> Mapping[str, str]:
    metadata = namespace.metadata
    return (metadata.labels if metadata is not None else None) or {}


def _is_gone(error: BaseException) -> bool:
    return isinstance(error, ApiException) and error.status == HTTP_GONE


def short_reason(error: BaseException) -> str:
    """One line on why a request failed, for logs and for the unknown-labels reason."""
    if isinstance(error, ApiException):
        return _api_error_reason(error)
    if isinstance(error, MaxRetryError) and error.reason is not None:
        error = error.reason
    root: BaseException = error
    while root.__cause__ is not None:
        root = root.__cause__
    # Before the timeout test: urllib3's NewConnectionError is a ConnectTimeoutError.
    if isinstance(root, OSError) and root.strerror and not isinstance(root, TimeoutError):
        return root.strerror.lower()
    if isinstance(error, Urllib3Timeout | TimeoutError) or isinstance(root, TimeoutError):
        return "timed out"
    return _clip(str(error) or type(error).__name__)


def _api_error_reason(error: ApiException) -> str:
    if not error.status:
        return _clip(" ".join(str(error.reason or "request failed").split()))
    message = ""
    if error.body:
        try:
            message = json.loads(error.body).get("message", "")
        except (ValueError, AttributeError):
            message = ""
    return _clip(f"HTTP {error.status} {message or error.reason or ''}".strip())


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
