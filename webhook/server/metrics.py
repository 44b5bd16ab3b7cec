"""Prometheus metrics of the service, exposed at GET /metrics.

Under gunicorn every worker is its own process: the master points PROMETHEUS_MULTIPROC_DIR
into the state directory before it forks, each worker writes its values there, and the
endpoint merges them all, whichever worker answers. Without that variable (an app built in a
test) the metrics live in a registry of their own.

prometheus_client picks its value storage when it is first imported, so nothing in the master
may import it before PROMETHEUS_MULTIPROC_DIR is set.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, multiprocess
from prometheus_client.exposition import choose_encoder

from webhook.policy.store import ReloadResult, ReloadStatus, ServedSet

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


class WebhookMetrics:
    def __init__(self) -> None:
        multiprocess_dir = os.environ.get(MULTIPROCESS_DIR_VARIABLE)
        self.registry = CollectorRegistry()
        if multiprocess_dir:
            multiprocess.MultiProcessCollector(self.registry, path=multiprocess_dir)
            # Each worker's values go to its files; the collector above reads them all.
            own: CollectorRegistry | None = None
        else:
            own = self.registry

        self.policy_reloads = Counter(
            "gpu_webhook_policy_reloads_total",
            "Attempts at reloading a changed policy directory, by result.",
            ["result"],
            registry=own,
        )
        # "livemax": a worker that failed and then died stops counting as failing.
        self.policy_reload_failing = Gauge(
            "gpu_webhook_policy_reload_failing",
            "1 while the policy directory does not load and an older set serves, else 0.",
            registry=own,
            multiprocess_mode="livemax",
        )
        self.policy_last_success = Gauge(
            "gpu_webhook_policy_last_success_timestamp_seconds",
            "When a policy set was last loaded from the policy directory, in Unix time.",
            registry=own,
            multiprocess_mode="max",
        )
        self.policies_loaded = Gauge(
            "gpu_webhook_policies_loaded",
            "Policies in the set that serves.",
            registry=own,
            multiprocess_mode="livemax",
        )
        for result in ("success", "failure"):
            self.policy_reloads.labels(result=result)

    def policies_observed(
        self, result: ReloadResult | None, current: ServedSet, status: ReloadStatus
    ) -> None:
        if result is not None:
            self.policy_reloads.labels(result=result).inc()
        self.policy_reload_failing.set(1 if status.failing else 0)
        self.policies_loaded.set(len(current.policy_set.policies))
        if current.source == "directory":
            self.policy_last_success.set(current.loaded_at.timestamp())

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition in the format `accept` asks for (Prometheus text by default)."""
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type


def mark_worker_dead(pid: int) -> None:
    """Drop the live gauges of a worker that exited; called by the gunicorn master."""
    if os.environ.get(MULTIPROCESS_DIR_VARIABLE):
        multiprocess.mark_process_dead(pid)
