"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it, so
that of two replicas only one patches nodes.

A candidate takes the Lease when it does not exist, when it holds it already, or when its
holder has not renewed it for `lease_seconds` (measured on this replica's clock, from when it
last saw the record change). A leader renews every `retry_period`; when no renewal succeeds for
`renew_deadline` it stops leading at once, before the Lease can expire and another replica
take it. On a graceful stop it releases the Lease, so that the other replica takes over
without waiting. Every call to the API has a deadline, so a dead connection cannot keep a
replica leading. Written here rather than taken from the kubernetes client's leaderelection,
which can be neither stopped nor released and waits on the API without a deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient, CoordinationV1Api
from kubernetes.client.exceptions import ApiException

from webhook.kube import raw_json
from webhook.kube.api_errors import HTTP_FORBIDDEN, HTTP_NOT_FOUND, short_reason

log = logging.getLogger("webhook")

MIN_LEASE_SECONDS = 3
HTTP_CONFLICT = 409
# What changes when a holder renews or hands over: a record that stays the same is a holder gone.
RECORD_FIELDS = ("holderIdentity", "renewTime", "leaseDurationSeconds")


@dataclass(frozen=True)
class LeaseTerms:
    """client-go's proportions (15 s lease, 10 s to renew, a try every 2 s), scaled."""

    name: str
    namespace: str
    identity: str
    lease_seconds: int = 15

    def __post_init__(self) -> None:
        if self.lease_seconds < MIN_LEASE_SECONDS:
            raise ValueError(f"a lease lasts {MIN_LEASE_SECONDS} seconds at least")

    @property
    def renew_deadline(self) -> float:
        return self.lease_seconds * 2 / 3

    @property
    def retry_period(self) -> float:
        return self.lease_seconds * 2 / 15

    @property
    def request_timeout(self) -> tuple[float, float]:
        # A try that cannot finish before the next is due is a failed try.
        return (self.retry_period, self.retry_period)


class LeaseRefused(Exception):
    """RBAC refuses the Lease: retrying cannot mend it. `str()` names the verb and resource."""


class Elector:
    """Runs `while_leading(stop)` on a thread of its own while this replica holds the Lease.
    `stop` is set when leadership ends (renewal failed, or `stop()`); `on_lost` is called when
    it ended by failure. `on_refused` is called once if RBAC refuses the Lease."""

    def __init__(
        self,
        api_client: ApiClient,
        terms: LeaseTerms,
        *,
        while_leading: Callable[[threading.Event], None],
        on_lost: Callable[[], None],
        on_refused: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = CoordinationV1Api(api_client)
        self._terms = terms
        self._while_leading = while_leading
        self._on_lost = on_lost
        self._on_refused = on_refused
        self._clock = clock
        self._stopping = threading.Event()
        self._leading_stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._work: threading.Thread | None = None
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._failing = False
        self.leading = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lease-elector", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop leading or waiting, wait for the work to end, and release a held Lease."""
        self._stopping.set()
        self._leading_stop.set()
        deadline = time.monotonic() + timeout
        for thread in (self._work, self._thread):
            if thread is not None:
                thread.join(max(deadline - time.monotonic(), 0.0))
        if self.leading:
            self._release()

    # --- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        terms = self._terms
        log.info(
            "nodes: waiting for the lease %s/%s as %s", terms.namespace, terms.name, terms.identity
        )
        try:
            while not self._stopping.is_set():
                if self._try():
                    self._lead()
                    return
                self._stopping.wait(terms.retry_period)
        except LeaseRefused as refused:
            self._stopping.set()
            self._on_refused(str(refused))

    def _lead(self) -> None:
        terms = self._terms
        self.leading = True
        log.info("nodes: leading as %s", terms.identity)
        self._work = threading.Thread(
            target=self._while_leading, args=(self._leading_stop,), name="leader-work", daemon=True
        )
        self._work.start()
        renewed = self._clock()
        while not self._stopping.wait(terms.retry_period):
            if self._try():
                renewed = self._clock()
            elif self._clock() - renewed >= terms.renew_deadline:
                # Stop before the Lease runs out, so that two replicas never patch at once.
                self.leading = False
                self._leading_stop.set()
                log.error(
                    "nodes: the lease was not renewed for %g s; no longer leading",
                    terms.renew_deadline,
                )
                self._on_lost()
                return

    def _try(self) -> bool:
        """One try at taking or renewing the Lease; True when this replica holds it now."""
        terms = self._terms
        try:
            lease = self._get()
            now = self._clock()
            if lease is None:
                self._call("create", self._body(None))
                return self._succeeded()
            spec = lease.get("spec") or {}
            record = tuple(
                spec.get(key) for key in ("holderIdentity", "renewTime", "leaseDurationSeconds")
            )
            if record != self._observed:
                self._observed, self._observed_at = record, now
            holder = spec.get("holderIdentity")
            duration = spec.get("leaseDurationSeconds") or terms.lease_seconds
            if holder and holder != terms.identity and now - self._observed_at < duration:
                return False
            self._call("update", self._body(lease))
            return self._succeeded()
        except LeaseRefused:
            raise
        except ApiException as error:
            if error.status != HTTP_CONFLICT:
                self._failed(error)
            return False
        except Exception as error:  # no connection, a timeout: the next try may do better
            self._failed(error)
            return False

    # --- the API ----------------------------------------------------------------------------

    def _get(self) -> Mapping[str, Any] | None:
        try:
            response = self._call("get", None)
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return None
            raise
        return response

    def _call(self, verb: str, body: Mapping[str, Any] | None) -> Mapping[str, Any]:
        terms = self._terms
        timeout = terms.request_timeout
        try:
            if verb == "get":
                return raw_json.call(
                    self._api.read_namespaced_lease,
                    terms.name,
                    terms.namespace,
                    _request_timeout=timeout,
                )
            if verb == "create":
                return raw_json.call(
                    self._api.create_namespaced_lease,
                    terms.namespace,
                    body,
                    _request_timeout=timeout,
                )
            return raw_json.call(
                self._api.replace_namespaced_lease,
                terms.name,
                terms.namespace,
                body,
                _request_timeout=timeout,
            )
        except ApiException as error:
            if error.status == HTTP_FORBIDDEN:
                raise LeaseRefused(
                    f"cannot {verb} leases.coordination.k8s.io {terms.name} in namespace "
                    f"{terms.namespace}: {short_reason(error)}: grant get, update and create on "
                    "it (deploy/base/advertiser-rbac.yaml)"
                ) from None
            raise

    def _body(self, current: Mapping[str, Any] | None) -> dict[str, Any]:
        terms = self._terms
        now = _micro_time()
        spec = dict((current or {}).get("spec") or {})
        if spec.get("holderIdentity") != terms.identity:
            spec["acquireTime"] = now
            if current is not None:
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(
            holderIdentity=terms.identity, leaseDurationSeconds=terms.lease_seconds, renewTime=now
        )
        metadata = {"name": terms.name, "namespace": terms.namespace}
        if current is not None:
            # The update is refused (409) if another replica wrote the Lease since it was read.
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    def _release(self) -> None:
        """Give the Lease up: no holder, and a duration of one second, as client-go does."""
        try:
            lease = self._get()
            if (
                lease is None
                or (lease.get("spec") or {}).get("holderIdentity") != self._terms.identity
            ):
                return
            body = self._body(lease)
            body["spec"].update(holderIdentity="", leaseDurationSeconds=1)
            body["spec"].pop("acquireTime", None)
            self._call("update", body)
            self.leading = False
            log.info("nodes: lease released")
        except Exception as error:  # it runs out on its own
            log.warning("nodes: could not release the lease (%s)", short_reason(error))

    def _succeeded(self) -> bool:
        if self._failing:
            self._failing = False
            log.info("nodes: the lease answers again")
        return True

    def _failed(self, error: BaseException) -> None:
        if not self._failing:
            self._failing = True
            log.warning("nodes: the lease could not be read or written (%s)", short_reason(error))


def _micro_time() -> str:
    """A metav1.MicroTime: RFC 3339 in UTC with microseconds."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
