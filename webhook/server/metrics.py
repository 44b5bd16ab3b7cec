"""Prometheus metrics of the service, exposed at GET /metrics.

Under gunicorn every worker is its own process: the master points PROMETHEUS_MULTIPROC_DIR
into the state directory before it forks, each worker writes its values there, and the
endpoint merges them all, whichever worker answers. Without that variable (an app built in a
test) the metrics live in a registry of their own.

Each admission is added to the metrics in its request, so that a scrape answered by any worker
counts every admission answered before it. (Counting in the worker's memory and adding in
batches once a second measured 0.95x of this in the benchmark: within its run-to-run noise,
and a scrape missed up to a second of another worker's admissions.)

prometheus_client picks its value storage when it is first imported, so nothing in the master
may import it before PROMETHEUS_MULTIPROC_DIR is set.

The serving certificate's expiry is no stored value: whichever worker answers the scrape reads
it from the certificate file, so it needs no merging and is never stale.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder

from webhook import __version__
from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS
from webhook.periodically import Periodically
from webhook.policy.store import ReloadResult, ReloadStatus, ServedSet
from webhook.server.admission_log import AdmissionRecord, Endpoint
from webhook.server.serving_certificate import CertificateExpiry

log = logging.getLogger("webhook")

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
# Counter children are kept by their labels: rewritten shares led by this first part,
# admissions by their four labels.
SHARES = "shares"
# How often a worker's gauges (its caches' bytes) are brought up to date in the shared files.
GAUGE_SECONDS = 1.0
ENDPOINTS: tuple[Endpoint, ...] = ("mutate", "validate")
# Most answers take well under a millisecond; the apiserver gives up after timeoutSeconds.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
# The kinds the webhook judges keep their name as a label; any other kind a client posts is
# "other", so a caller cannot mint a time series per made-up kind.
_KINDS = {(group, kind): kind for group, kind in POD_TEMPLATE_LOCATIONS}


def kind_label(group: str, kind: str) -> str:
    return _KINDS.get((group, kind), "other" if kind else "")


def merged_registry(directory: str, cert_file: Path | None) -> CollectorRegistry:
    """What /metrics shows under gunicorn, in a worker or in the master: every worker's values
    from the files in `directory`, and the serving certificate's expiry."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    if cert_file is not None:
        registry.register(_ServingCertificateCollector(CertificateExpiry(cert_file)))
    return registry


class WebhookMetrics:
    def __init__(
        self,
        cert_file: Path | None = None,
        cached_bytes: Callable[[], int] | None = None,
    ) -> None:
        multiprocess_dir = os.environ.get(MULTIPROCESS_DIR_VARIABLE)
        self._shared = bool(multiprocess_dir)
        if multiprocess_dir:
            # Each worker's values go to its files; the registry reads them all.
            self.registry = merged_registry(multiprocess_dir, cert_file)
            own: CollectorRegistry | None = None
        else:
            self.registry = CollectorRegistry()
            own = self.registry
            if cert_file is not None:
                self.registry.register(_ServingCertificateCollector(CertificateExpiry(cert_file)))

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
        # The same 1 in every worker: "max" keeps one series, however many workers serve.
        self.build_info = Gauge(
            "gpu_webhook_build_info",
            "Always 1, labelled with the version of the webhook that serves.",
            ["version"],
            registry=own,
            multiprocess_mode="max",
        )
        self.build_info.labels(version=__version__).set(1)
        # "livesum": what the live workers hold together.
        self.outcome_cache_bytes = Gauge(
            "gpu_webhook_outcome_cache_bytes",
            "An estimate of the bytes the outcome and verdict caches of the workers hold (each "
            "worker's are bounded at 16 MiB of the estimate each).",
            registry=own,
            multiprocess_mode="livesum",
        )
        self._cached_bytes = cached_bytes
        self.shares_rewritten = Counter(
            "gpu_webhook_shares_rewritten_total",
            "Objects whose shares of a GPU were rewritten, by policy and by the GPU model they "
            "were sized for.",
            ["policy", "model"],
            registry=own,
        )

        self.admissions = Counter(
            "gpu_webhook_admissions_total",
            "Requests to /mutate and /validate, by the kind of object, the verdict and the policy "
            'that governed it ("" when none did). verdict="bad_request": a client fault, a '
            "body that is not an AdmissionReview or a request that is not one: an HTTP 400, 408, "
            "413, 415, 431 or 501, or a client that closed before its request arrived whole.",
            ["endpoint", "kind", "verdict", "policy"],
            registry=own,
        )
        self.admission_duration = Histogram(
            "gpu_webhook_admission_duration_seconds",
            "Time to decode, judge and encode one AdmissionReview, from its body read to its "
            "answer ready to send.",
            ["endpoint"],
            buckets=DURATION_BUCKETS,
            registry=own,
        )
        # Bound once: the histogram's labels never change.
        self._durations = {
            endpoint: self.admission_duration.labels(endpoint) for endpoint in ENDPOINTS
        }
        # The admission counter's children by their labels. The labels are few: endpoints,
        # judged kinds, verdicts and policy names.
        self._admission_counts: dict[tuple[str, ...], Any] = {}
        for endpoint in ENDPOINTS:
            self._count((endpoint, "", "bad_request", ""))
        self._gauges: Periodically | None = None

    def policies_observed(
        self, result: ReloadResult | None, current: ServedSet, status: ReloadStatus
    ) -> None:
        if result is not None:
            self.policy_reloads.labels(result=result).inc()
        self.policy_reload_failing.set(1 if status.failing else 0)
        self.policies_loaded.set(len(current.policy_set.policies))
        if current.source == "directory":
            self.policy_last_success.set(current.loaded_at.timestamp())

    def admitted(self, record: AdmissionRecord) -> None:
        kind = kind_label(record.group, record.kind)
        self._add((record.endpoint, kind, record.verdict, record.policy), record.endpoint, record)
        if record.model:
            self._add((SHARES, record.policy, record.model), None, record)

    def rejected(self, endpoint: Endpoint) -> None:
        self._add((endpoint, "", "bad_request", ""), None, None)

    def _add(
        self, labels: tuple[str, ...], histogram: str | None, record: AdmissionRecord | None
    ) -> None:
        """In the request: a fault (a full disk under the metrics files) is logged, and never
        reaches the answer."""
        try:
            self._count(labels).inc()
            if histogram is not None and record is not None:
                self._durations[cast(Endpoint, histogram)].observe(record.seconds)
        except Exception:
            log.exception("could not update the admission metrics")

    def start_publishing(self) -> None:
        """Keep this worker's gauges fresh in the shared files every GAUGE_SECONDS, from a
        thread of this process. Only where workers share metrics files: otherwise a scrape
        reads them as it renders."""
        if self._shared and self._gauges is None:
            self._gauges = Periodically(
                GAUGE_SECONDS,
                self.refresh_gauges,
                "refreshing the metrics gauges",
                thread_name="metrics-gauges",
                last_act=False,
            )
            self._gauges.start()

    def refresh_gauges(self) -> None:
        try:
            if self._cached_bytes is not None:
                self.outcome_cache_bytes.set(self._cached_bytes())
        except Exception:
            log.exception("could not update the metrics gauges")

    def _count(self, labels: tuple[str, ...]) -> Any:
        """The counter child of these labels: a share rewritten (led by SHARES), or an
        admission."""
        child = self._admission_counts.get(labels)
        if child is None:
            counter = self.shares_rewritten if labels[0] == SHARES else self.admissions
            start = 1 if labels[0] == SHARES else 0
            child = self._admission_counts[labels] = counter.labels(*labels[start:])
        return child

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition in the format `accept` asks for (Prometheus text by default)."""
        self.refresh_gauges()
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type


class _ServingCertificateCollector:
    def __init__(self, expiry: CertificateExpiry) -> None:
        self.expiry = expiry

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "gpu_webhook_serving_certificate_expiry_timestamp_seconds",
            "When the serving certificate (TLS_CERT_FILE) expires, its notAfter in Unix time; "
            "absent while the file cannot be read. Days left: "
            "(gpu_webhook_serving_certificate_expiry_timestamp_seconds - time()) / 86400.",
        )
        not_after = self.expiry.not_after()
        if not_after is not None:
            family.add_metric([], not_after)
        yield family


def mark_worker_dead(pid: int) -> None:
    """Drop the live gauges of a worker that exited; called by the gunicorn master."""
    if os.environ.get(MULTIPROCESS_DIR_VARIABLE):
        multiprocess.mark_process_dead(pid)
