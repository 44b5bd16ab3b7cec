"""Leader election on a coordination.k8s.io Lease, with the kubernetes client's `leaderelection`,
so that of two replicas only one patches nodes.

The client's elector cannot be stopped and never releases its lease: a replica that loses the
lease stops working for good (the process exits and is restarted as a follower, as client-go's
users do), and after a replica is gone the other takes over when the lease runs out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes.client import ApiClient, CoordinationV1Api
from kubernetes.leaderelection import electionconfig
from kubernetes.leaderelection.leaderelection import LeaderElection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

log = logging.getLogger("webhook")

MIN_LEASE_SECONDS = 3


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
        # The client refuses less than a second, and a deadline under 1.2 tries.
        return max(1.0, self.lease_seconds * 2 / 15)


def lead(
    api_client: ApiClient,
    terms: LeaseTerms,
    while_leading: Callable[[], None],
    on_lost: Callable[[], None],
) -> None:
    """Wait to hold the lease, then run `while_leading` on a thread and renew until renewal
    fails, then call `on_lost`. Returns only after that."""
    lock = LeaseLock(terms.name, terms.namespace, terms.identity)
    # LeaseLock builds its API from the default configuration; ours comes from the kubeconfig
    # or the pod's service account.
    lock.api_instance = CoordinationV1Api(api_client)
    config = electionconfig.Config(
        lock,
        lease_duration=terms.lease_seconds,
        renew_deadline=terms.renew_deadline,
        retry_period=terms.retry_period,
        onstarted_leading=while_leading,
        onstopped_leading=on_lost,
    )
    # The elector logs every try at INFO ("yet to finish lease_duration"): keep its warnings.
    logging.getLogger("leaderelection").setLevel(logging.WARNING)
    log.info(
        "nodes: waiting for the lease %s/%s as %s", terms.namespace, terms.name, terms.identity
    )
    LeaderElection(config).run()
