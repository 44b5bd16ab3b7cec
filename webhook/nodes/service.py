"""`python -m webhook advertise` as a service: hold the lease, watch nodes and the policy
directory, and keep every node's VRAM resource right until SIGTERM.

A fault that retrying cannot mend (RBAC that refuses the patch, a lost lease) ends the process
with a message that says what is missing; its Deployment starts it again.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from kubernetes.client import ApiClient, CoreV1Api

from webhook.kube.informer import Informer
from webhook.nodes.advertiser import Advertiser
from webhook.nodes.advertiser_metrics import AdvertiserMetrics, MetricsServer
from webhook.nodes.leadership import LeaseTerms, lead
from webhook.nodes.node_events import NodeEvents
from webhook.periodically import Periodically
from webhook.policy.store import PolicyStore, ReloadStatus, ServedSet

log = logging.getLogger("webhook")

POLICY_POLL_SECONDS = 2.0
INFORMER_STOP_SECONDS = 2.0
LOST_LEASE = 1
FATAL = 2


@dataclass(frozen=True)
class ServiceOptions:
    policies: Path
    identity: str
    resync_seconds: float
    lease: LeaseTerms | None
    metrics_bind: tuple[str, int] | None


class Stopping(Exception):
    """Raised in the main thread by SIGTERM or SIGINT, or by a fault on another thread."""


class NodeService:
    def __init__(self, api_client: ApiClient, options: ServiceOptions) -> None:
        self._api_client = api_client
        self._options = options
        self._core = CoreV1Api(api_client)
        self.metrics = AdvertiserMetrics()
        self._stop = threading.Event()
        self._exit_code = 0
        self._store: PolicyStore | None = None
        self._advertiser: Advertiser | None = None

    def run(self, store: PolicyStore) -> int:
        """Serve until stopped; the exit code. `store` holds the policies, loaded already."""
        self._store = store
        self._advertiser = Advertiser(
            self._core,
            lambda: store.current.policy_set.policies,
            metrics=self.metrics,
            events=NodeEvents(self._core, self._options.identity),
            on_fatal=self._fatal,
        )
        metrics_server = self._metrics_server()
        try:
            with _stopped_by_signals():
                if self._options.lease is None:
                    self._work()
                else:
                    lead(self._api_client, self._options.lease, self._lead, self._lost)
                    self._stop.wait()
        except Stopping:
            log.info("nodes: stopping")
        finally:
            self._stop.set()
            if metrics_server is not None:
                metrics_server.stop()
        return self._exit_code

    def policies_observed(self, result: object, current: ServedSet, status: ReloadStatus) -> None:
        """The policy store's observer: a new set may move nodes in or out of pools."""
        if result == "success" and self._advertiser is not None and not self._stop.is_set():
            tally = self._advertiser.resync()
            if tally is not None:
                log.info("nodes: the policies changed; %s", tally.summary(dry_run=False))

    def _lead(self) -> None:
        self.metrics.leading(True)
        log.info("nodes: leading as %s", self._options.identity)
        self._work()

    def _lost(self) -> None:
        self.metrics.leading(False)
        if self._stop.is_set():
            return
        log.error("nodes: the lease was lost; stopping so that one replica patches at a time")
        self._exit_code = LOST_LEASE
        self._stop.set()

    def _work(self) -> None:
        """Watch nodes and the policies until stopped."""
        assert self._store is not None and self._advertiser is not None
        informer = Informer(self._core.list_node, self._advertiser, what="nodes")
        watcher = self._store.start_watching(POLICY_POLL_SECONDS)
        resync = Periodically(
            self._options.resync_seconds,
            self._advertiser.resync,
            "resyncing the nodes",
            thread_name="advertiser-resync",
            last_act=False,
        )
        informer.start()
        resync.start()
        try:
            self._stop.wait()
        finally:
            resync.stop()
            watcher.stop()
            informer.stop(INFORMER_STOP_SECONDS)

    def _fatal(self, message: str) -> None:
        log.error("nodes: %s", message)
        self._exit_code = FATAL
        self._stop.set()
        # Wake the main thread wherever it waits (the elector sleeps between tries).
        signal.raise_signal(signal.SIGTERM)

    def _metrics_server(self) -> MetricsServer | None:
        if self._options.metrics_bind is None:
            return None
        host, port = self._options.metrics_bind
        server = MetricsServer(self.metrics, host, port)
        server.start()
        log.info("nodes: metrics on http://%s:%d/metrics", host, server.port)
        return server


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    def stop(signum: int, frame: FrameType | None) -> None:
        raise Stopping(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
