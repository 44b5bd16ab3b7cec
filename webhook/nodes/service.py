"""`python -m webhook advertise` as a service: hold the lease, watch nodes and the policy
directory, and keep every node's VRAM resource right until SIGTERM.

A fault that retrying cannot mend (RBAC that refuses the patch or the Lease, a lost Lease) ends
the process with a message that says what is missing; its Deployment starts it again. SIGTERM
stops the work, waits for it (bounded) and releases the Lease, so the other replica takes over
at once.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from kubernetes.client import ApiClient, CoreV1Api

from webhook.kube.informer import Informer
from webhook.metrics_http import MetricsServer
from webhook.nodes.advertiser import Advertiser
from webhook.nodes.advertiser_metrics import AdvertiserMetrics
from webhook.nodes.leadership import Elector, LeaseTerms
from webhook.nodes.node_events import NodeEvents
from webhook.nodes.patch_limits import PatchLimits
from webhook.periodically import Periodically
from webhook.policy.store import PolicyStore, ReloadStatus, ServedSet

log = logging.getLogger("webhook")

POLICY_POLL_SECONDS = 2.0
INFORMER_STOP_SECONDS = 2.0
# Within the Deployment's grace period of 15 s, with the Lease's release after it.
STOP_SECONDS = 8.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
LOST_LEASE = 1
FATAL = 2


@dataclass(frozen=True)
class ServiceOptions:
    policies: Path
    identity: str
    resync_seconds: float
    lease: LeaseTerms | None
    metrics_bind: tuple[str, int] | None
    limits: PatchLimits = field(default_factory=PatchLimits)


class NodeService:
    def __init__(self, api_client: ApiClient, options: ServiceOptions) -> None:
        self._api_client = api_client
        self._options = options
        self._core = CoreV1Api(api_client)
        self.metrics = AdvertiserMetrics()
        self._stop = threading.Event()
        self._exit_lock = threading.Lock()
        self._exit_code: int | None = None
        self._store: PolicyStore | None = None
        self._advertiser: Advertiser | None = None
        self._events = NodeEvents(self._core, options.identity)

    def run(self, store: PolicyStore) -> int:
        """Serve until SIGTERM or SIGINT, or a fault retrying cannot mend; the exit code.
        `store` holds the policies, loaded already."""
        self._store = store
        self._advertiser = Advertiser(
            self._core,
            lambda: store.current.policy_set.policies,
            metrics=self.metrics,
            events=self._events,
            on_fatal=self._fatal,
            stopping=self._stop,
            limits=self._options.limits,
        )
        metrics_server = self._metrics_server()
        previous = {sig: signal.signal(sig, self._signalled) for sig in STOP_SIGNALS}
        stop_work: Callable[[], None]
        if self._options.lease is None:
            work = threading.Thread(target=self._work, args=(self._stop,), name="advertiser")
            work.start()
            stop_work = lambda: work.join(STOP_SECONDS)  # noqa: E731
        else:
            elector = Elector(
                self._api_client,
                self._options.lease,
                while_leading=self._lead,
                on_lost=self._lost,
                on_refused=self._fatal,
            )
            elector.start()
            stop_work = lambda: elector.stop(STOP_SECONDS)  # noqa: E731
        try:
            # A timed wait, so that the signal handler runs promptly in this thread.
            while not self._stop.wait(1.0):
                pass
        finally:
            self._stop.set()
            stop_work()
            self._events.close(INFORMER_STOP_SECONDS)
            self.metrics.leading(False)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if metrics_server is not None:
                metrics_server.stop()
        log.info("nodes: stopped")
        return self._exit_code or 0

    def policies_observed(self, result: object, current: ServedSet, status: ReloadStatus) -> None:
        """The policy store's observer: a new set may move nodes in or out of pools."""
        if result == "success" and self._advertiser is not None and not self._stop.is_set():
            tally = self._advertiser.resync()
            if tally is not None:
                log.info("nodes: the policies changed; %s", tally.summary(dry_run=False))

    def _signalled(self, signum: int, frame: FrameType | None) -> None:
        log.info("nodes: %s, stopping", signal.Signals(signum).name)
        self._stop.set()

    def _lead(self, leading_stop: threading.Event) -> None:
        self.metrics.leading(True)
        try:
            self._work(leading_stop)
        finally:
            self.metrics.leading(False)

    def _lost(self) -> None:
        self._end(LOST_LEASE, "the lease was lost; stopping so that one replica patches at a time")

    def _fatal(self, message: str) -> None:
        self._end(FATAL, message)

    def _end(self, code: int, message: str) -> None:
        """The first fault decides the exit code; the main thread wakes and stops the rest."""
        with self._exit_lock:
            if self._exit_code is not None or self._stop.is_set():
                return
            self._exit_code = code
        log.error("nodes: %s", message)
        self._stop.set()

    def _work(self, stop: threading.Event) -> None:
        """Watch nodes and the policies until `stop` is set."""
        assert self._store is not None and self._advertiser is not None
        informer = Informer(
            self._core.list_node, self._advertiser, keep=self._advertiser.keep, what="nodes"
        )
        self._advertiser.watched_by(informer.relist)
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
            stop.wait()
        finally:
            informer.stop(INFORMER_STOP_SECONDS)
            resync.stop(INFORMER_STOP_SECONDS)
            watcher.stop(INFORMER_STOP_SECONDS)

    def _metrics_server(self) -> MetricsServer | None:
        if self._options.metrics_bind is None:
            return None
        host, port = self._options.metrics_bind
        server = MetricsServer(self.metrics.render, host, port)
        server.start("advertiser-metrics")
        log.info("nodes: metrics on http://%s:%d/metrics", host, server.port)
        return server
