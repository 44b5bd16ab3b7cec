"""The advertiser's Prometheus metrics, and the plain HTTP endpoint that serves them with a health
check (`--metrics-bind`). The advertiser is one process, so one registry of its own serves."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

PREFIX = "gpu_vram_advertiser"
ERROR_KINDS = ("labels", "conflict", "forbidden", "api")


class AdvertiserMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._nodes = Gauge(
            f"{PREFIX}_nodes_advertised",
            "Nodes that advertise the VRAM resource, by resource",
            ["resource"],
            registry=self.registry,
        )
        self._patches = Counter(
            f"{PREFIX}_patches",
            "Node status patches sent, by result",
            ["result"],
            registry=self.registry,
        )
        self._errors = Counter(
            f"{PREFIX}_errors",
            "Nodes skipped for unreadable labels or conflicting policies, and API refusals",
            ["kind"],
            registry=self.registry,
        )
        self._leader = Gauge(
            f"{PREFIX}_leader", "1 while this replica holds the lease", registry=self.registry
        )
        self._resources: set[str] = set()
        for result in ("applied", "failed"):
            self._patches.labels(result)
        for kind in ERROR_KINDS:
            self._errors.labels(kind)

    def nodes_advertised(self, by_resource: Mapping[str, int]) -> None:
        for resource in self._resources - set(by_resource):
            self._nodes.remove(resource)
        self._resources = set(by_resource)
        for resource, count in by_resource.items():
            self._nodes.labels(resource).set(count)

    def patched(self) -> None:
        self._patches.labels("applied").inc()

    def patch_failed(self) -> None:
        self._patches.labels("failed").inc()
        self._errors.labels("api").inc()

    def error(self, kind: str) -> None:
        self._errors.labels(kind).inc()

    def leading(self, leads: bool) -> None:
        self._leader.set(1 if leads else 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)
