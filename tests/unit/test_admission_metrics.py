"""Admissions counted in memory and published in batches give the metrics that counting each
one at once gives: the same counter values, the same histogram buckets, count and sum."""

from __future__ import annotations

import sys
import threading

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from webhook.server.admission_log import AdmissionRecord
from webhook.server.metrics import (
    DURATION_BUCKETS,
    MULTIPROCESS_DIR_VARIABLE,
    WebhookMetrics,
    kind_label,
)

# On, between and beyond the bucket bounds: Prometheus buckets count values at or below them.
DURATIONS = (0.0001, 0.0005, 0.0007, 0.001, 0.003, 0.01, 0.2, 1.0, 2.5, 0.0005, 0.0)
ANSWERS = (
    ("mutate", "", "Pod", "patched", "default"),
    ("mutate", "", "Pod", "allowed", ""),
    ("validate", "apps", "Deployment", "denied", "default"),
    ("mutate", "", "ConfigMap", "allowed", ""),
)


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROCESS_DIR_VARIABLE, raising=False)


def record(
    endpoint: str,
    group: str,
    kind: str,
    verdict: str,
    policy: str,
    seconds: float,
    model: str = "",
) -> AdmissionRecord:
    return AdmissionRecord(
        endpoint=endpoint,  # type: ignore[arg-type]
        uid="u",
        group=group,
        kind=kind,
        namespace="ml",
        name="p",
        generate_name="",
        operation="CREATE",
        dry_run=False,
        verdict=verdict,  # type: ignore[arg-type]
        policy=policy,
        model=model,
        code=200,
        message="",
        patch_operations=0,
        warnings=0,
        seconds=seconds,
    )


def samples(exposition: str, prefix: str) -> dict[tuple, float]:
    found = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name.startswith(prefix) and not sample.name.endswith("_created"):
                found[(sample.name, *sorted(sample.labels.items()))] = sample.value
    return found


def counted_one_at_a_time(answers: list[tuple], rejected: list[str]) -> str:
    """The exposition of the same metrics, each answer counted with observe and inc."""
    registry = CollectorRegistry()
    admissions = Counter(
        "gpu_webhook_admissions_total",
        "",
        ["endpoint", "kind", "verdict", "policy"],
        registry=registry,
    )
    durations = Histogram(
        "gpu_webhook_admission_duration_seconds",
        "",
        ["endpoint"],
        buckets=DURATION_BUCKETS,
        registry=registry,
    )
    for endpoint, group, kind, verdict, policy, seconds in answers:
        admissions.labels(endpoint, kind_label(group, kind), verdict, policy).inc()
        durations.labels(endpoint).observe(seconds)
    for endpoint in rejected:
        admissions.labels(endpoint, "", "bad_request", "").inc()
    return generate_latest(registry).decode()


def test_batched_counts_equal_counting_each_admission_at_once() -> None:
    metrics = WebhookMetrics()
    answers = [
        (*ANSWERS[index % len(ANSWERS)], seconds) for index, seconds in enumerate(DURATIONS * 3)
    ]
    rejected = ["mutate", "validate", "mutate"]
    for answer in answers:
        metrics.admitted(record(*answer))
    for endpoint in rejected:
        metrics.rejected(endpoint)  # type: ignore[arg-type]
    body, _ = metrics.render(None)
    expected = counted_one_at_a_time(answers, rejected)
    for prefix in ("gpu_webhook_admissions_total", "gpu_webhook_admission_duration_seconds"):
        found, wanted = samples(body.decode(), prefix), samples(expected, prefix)
        # The webhook names every endpoint's bad_request series up front, at 0.
        assert {key: value for key, value in found.items() if value} == {
            key: value for key, value in wanted.items() if value
        }
        assert wanted, prefix


def test_a_scrape_publishes_what_was_counted_before_it() -> None:
    metrics = WebhookMetrics()
    metrics.admitted(record(*ANSWERS[0], 0.002))
    first = samples(metrics.render(None)[0].decode(), "gpu_webhook_admission_duration_seconds")
    metrics.admitted(record(*ANSWERS[0], 0.002))
    second = samples(metrics.render(None)[0].decode(), "gpu_webhook_admission_duration_seconds")
    count = ("gpu_webhook_admission_duration_seconds_count", ("endpoint", "mutate"))
    assert (first[count], second[count]) == (1, 2)


def test_admissions_counted_from_many_threads_are_all_kept() -> None:
    # Threads switch as often as they can, so that an unguarded read-modify-write loses counts.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    metrics = WebhookMetrics()
    per_thread, threads = 1000, 8

    def count() -> None:
        for _ in range(per_thread):
            metrics.admitted(record(*ANSWERS[0], 0.001))

    try:
        workers = [threading.Thread(target=count) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)
    labels = {"endpoint": "mutate", "kind": "Pod", "verdict": "patched", "policy": "default"}
    registry = metrics.registry
    total = per_thread * threads
    assert registry.get_sample_value("gpu_webhook_admissions_total", labels) == total
    assert (
        registry.get_sample_value(
            "gpu_webhook_admission_duration_seconds_count", {"endpoint": "mutate"}
        )
        == total
    )


def test_a_scrape_says_what_the_outcome_caches_hold() -> None:
    held = [4321]
    metrics = WebhookMetrics(cached_bytes=lambda: held[0])
    body, _ = metrics.render(None)
    assert b"\ngpu_webhook_outcome_cache_bytes 4321.0\n" in body
    held[0] = 99
    body, _ = metrics.render(None)
    assert b"\ngpu_webhook_outcome_cache_bytes 99.0\n" in body


def test_each_admission_is_in_the_metrics_at_once() -> None:
    metrics = WebhookMetrics()
    metrics.admitted(record(*ANSWERS[0], 0.002))
    metrics.rejected("validate")
    labels = {"endpoint": "mutate", "kind": "Pod", "verdict": "patched", "policy": "default"}
    registry = metrics.registry
    assert registry.get_sample_value("gpu_webhook_admissions_total", labels) == 1.0
    assert (
        registry.get_sample_value(
            "gpu_webhook_admission_duration_seconds_count", {"endpoint": "mutate"}
        )
        == 1.0
    )
    bad = {"endpoint": "validate", "kind": "", "verdict": "bad_request", "policy": ""}
    assert registry.get_sample_value("gpu_webhook_admissions_total", bad) == 1.0


def test_a_metrics_fault_in_the_request_is_logged_not_raised(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = WebhookMetrics()

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(metrics, "_count", full_disk)
    metrics.admitted(record(*ANSWERS[0], 0.002))
    assert "could not update the admission metrics" in caplog.text
    assert "No space left on device" in caplog.text


def test_shares_rewritten_are_counted_by_policy_and_model() -> None:
    metrics = WebhookMetrics()
    metrics.admitted(record("mutate", "", "Pod", "patched", "default", 0.001, "Tesla-T4"))
    metrics.admitted(
        record("mutate", "apps", "Deployment", "patched", "default", 0.001, "Tesla-T4")
    )
    metrics.admitted(record("mutate", "", "Pod", "patched", "default", 0.001))
    text = generate_latest(metrics.registry).decode()
    found = samples(text, "gpu_webhook_shares_rewritten_total")
    assert list(found.values()) == [2.0], found
