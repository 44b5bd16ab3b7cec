"""The labels of every namespace, kept in memory by a LIST and WATCH of the Kubernetes API.

An admission asks `labels_of(name)`; a namespace the informer has seen answers from a dict. One
it has not seen yet (created a moment ago, or the informer has not listed yet) is read with one
short GET, shared by every admission that asks for it meanwhile. When the API fails, what the
cache holds keeps answering, and misses answer "unknown" at once for a few seconds instead of
each waiting on a dead API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from webhook.kube.api_errors import HTTP_NOT_FOUND, short_reason
from webhook.kube.informer import Backoff, Informer, InformerBacked, KubeObject
from webhook.policy.namespace_labels import LabelLookup

log = logging.getLogger("webhook")

NO_ANSWER = "the Kubernetes API did not answer"

# What the cache holds of a namespace: its name and its labels, nothing else of the object.
KeptLabels = tuple[str, LabelLookup]


def kept_labels(namespace: KubeObject) -> KeptLabels | None:
    metadata = namespace.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    return name, LabelLookup.known(metadata.get("labels") or {})


class _Flight:
    """One GET under way; the admissions that miss the same name meanwhile wait for it."""

    __slots__ = ("done", "result", "superseded")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result = LabelLookup.unknown(NO_ANSWER)
        # Set when the informer writes the name meanwhile: its answer is newer than the GET's.
        self.superseded = False


class NamespaceLabelCache(InformerBacked):
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
        self._clock = clock

        # Read without the lock (a dict lookup is atomic); every write holds the lock.
        self._known: dict[str, LabelLookup] = {}
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._failure: tuple[float, LabelLookup] | None = None
        self._lookups_failing = False
        self._informer = Informer(
            self._core.list_namespace,
            self,
            keep=kept_labels,
            what="namespace labels",
            watch_timeout=watch_timeout,
            backoff=backoff,
        )

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
            metadata = found.metadata
            lookup = LabelLookup.known((metadata.labels if metadata is not None else None) or {})
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

    def listed(self, objects: list[KeptLabels]) -> None:
        fresh = dict(objects)
        with self._lock:
            self._known = fresh
            self._failure = None
            for flight in self._flights.values():
                flight.superseded = True

    def changed(self, event_type: str, obj: KeptLabels) -> None:
        name, labels = obj
        with self._lock:
            if event_type == "DELETED":
                self._known.pop(name, None)
            else:
                self._known[name] = labels
            flight = self._flights.get(name)
            if flight is not None:
                flight.superseded = True
