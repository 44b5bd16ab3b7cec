"""The targets the webhook must meet, as data, and their evaluation: a pure function of the
figures a run wrote (latest.json), so the rules can be tested without measuring anything.

Saturation targets read the medians of runs taken in turn with their baseline (the spread and
TLS sections): one run against one run can be thrown either way by other load on the machine.

A figure is named by its dotted path in the figures. A target passes only when its figure is
there, within the limit, every run it comes from finished without an error (a socket error, a
timeout, an answer that is not 2xx), and every figure it requires reached its minimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Comparison = Literal["at least", "at most"]

HTTP_GPU = "http.gpu-pod.kept-alive"
NODES_LARGEST = "nodes.sizes.100000"
NODES_MIDDLE = "nodes.sizes.10000"
MEMORY_REQUESTS = ("memory.requests_served", 100_000)


@dataclass(frozen=True)
class Target:
    name: str
    figure: str
    comparison: Comparison
    limit: float
    unit: str
    # Run records (or lists of them) whose errors disqualify the figure.
    runs: tuple[str, ...] = ()
    # Figures that must reach a minimum for this one to count.
    requires: tuple[tuple[str, float], ...] = ()


TARGETS: tuple[Target, ...] = (
    Target(
        "gpu-pod kept-alive saturation, ours ÷ floor (medians of 5 runs each)",
        "spread.ours_over_floor",
        "at least",
        0.85,
        "x floor",
        runs=("spread.ours.runs", "spread.floor.runs"),
    ),
    Target(
        "gpu-pod kept-alive saturation (median of 5 runs)",
        "spread.ours.median",
        "at least",
        2000,
        "admissions/s",
        runs=("spread.ours.runs",),
    ),
    Target(
        "gpu-pod kept-alive at 500/s, p50",
        f"{HTTP_GPU}.ours.rates.500.latency_ms.p50",
        "at most",
        2.0,
        "ms",
        runs=(f"{HTTP_GPU}.ours.rates.500",),
    ),
    Target(
        "gpu-pod kept-alive at 500/s, p99",
        f"{HTTP_GPU}.ours.rates.500.latency_ms.p99",
        "at most",
        10.0,
        "ms",
        runs=(f"{HTTP_GPU}.ours.rates.500",),
    ),
    Target(
        "spread of 5 saturation runs, slowest ÷ median",
        "spread.ours.slowest_over_median",
        "at least",
        0.80,
        "x median",
        runs=("spread.ours.runs",),
    ),
    Target(
        "new TLS connection per request, ours ÷ per-connection-TLS baseline",
        "tls.ratio",
        "at least",
        1.8,
        "x baseline",
        runs=("tls.ours.runs", "tls.baseline.runs"),
    ),
    Target(
        "in-process decision, gpu-pod median",
        "decision.scenarios.gpu-pod.decide_us.median",
        "at most",
        60.0,
        "µs",
    ),
    Target(
        "in-process decision, plain-pod median",
        "decision.scenarios.plain-pod.decide_us.median",
        "at most",
        15.0,
        "µs",
    ),
    Target(
        "in-process decision, 1,000 policies ÷ 1 policy",
        "decision.policies.ratio",
        "at most",
        2.0,
        "x 1 policy",
    ),
    Target(
        "in-process decision linear in containers, slope 10→100 ÷ slope 1→10",
        "decision.containers.slope_ratio",
        "at most",
        1.5,
        "x slope 1→10",
    ),
    Target(
        "RSS per worker after 100,000 requests (largest worker)",
        "memory.max_after_mib",
        "at most",
        80.0,
        "MiB",
        requires=(MEMORY_REQUESTS,),
    ),
    Target(
        "RSS growth per worker from warm-up to the end (largest)",
        "memory.max_growth_mib",
        "at most",
        10.0,
        "MiB",
        requires=(MEMORY_REQUESTS,),
    ),
    Target(
        "advertiser peak RSS, 100,000 nodes",
        f"{NODES_LARGEST}.first.peak_rss_mib",
        "at most",
        150.0,
        "MiB",
        runs=(f"{NODES_LARGEST}.first", f"{NODES_LARGEST}.second"),
    ),
    Target(
        "advertiser first pass, 100,000 nodes of which 50,000 in the pool",
        f"{NODES_LARGEST}.first.seconds",
        "at most",
        60.0,
        "s",
        runs=(f"{NODES_LARGEST}.first",),
    ),
    Target(
        "node inventory peak RSS, 100,000 nodes",
        f"{NODES_LARGEST}.inventory.peak_rss_mib",
        "at most",
        150.0,
        "MiB",
        runs=(f"{NODES_LARGEST}.inventory",),
    ),
    Target(
        "advertiser patches/s at 10,000 nodes, in parallel ÷ one at a time",
        "nodes.parallel_over_serial",
        "at least",
        1.25,
        "x one at a time",
        runs=(f"{NODES_MIDDLE}.first", "nodes.serial.first"),
    ),
)


@dataclass(frozen=True)
class Outcome:
    target: Target
    value: float | None
    errors: int
    passed: bool
    # Why it failed other than by its value: a missing figure, errors, a minimum not reached.
    reason: str = ""


def lookup(figures: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, or None when any part of it is missing."""
    node: Any = figures
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def run_errors(figures: Mapping[str, Any], path: str) -> int | None:
    """The errors of the run record (or the list of them) at `path`; None when it is missing."""
    node = lookup(figures, path)
    records = node if isinstance(node, list) else [node]
    if node is None or not all(isinstance(record, Mapping) for record in records):
        return None
    return sum(int(record.get("error_count", 0)) for record in records)


def within(value: float, comparison: Comparison, limit: float) -> bool:
    return value >= limit if comparison == "at least" else value <= limit


def evaluate_one(target: Target, figures: Mapping[str, Any]) -> Outcome:
    value = lookup(figures, target.figure)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return Outcome(target, None, 0, False, f"{target.figure} was not measured")
    errors = 0
    for path in target.runs:
        found = run_errors(figures, path)
        if found is None:
            return Outcome(target, value, 0, False, f"the run {path} is missing")
        errors += found
    if errors:
        return Outcome(target, value, errors, False, f"{errors} errors in the runs it comes from")
    for path, minimum in target.requires:
        reached = lookup(figures, path)
        if not isinstance(reached, int | float):
            return Outcome(target, value, 0, False, f"{path} was not measured")
        if reached < minimum:
            return Outcome(target, value, 0, False, f"{path} is {reached:,}, needs {minimum:,}")
    return Outcome(target, value, 0, within(value, target.comparison, target.limit))


def evaluate(figures: Mapping[str, Any], targets: tuple[Target, ...] = TARGETS) -> list[Outcome]:
    return [evaluate_one(target, figures) for target in targets]
