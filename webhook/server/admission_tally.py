"""Admissions counted in the worker's memory, to be added to the Prometheus metrics in batches.

Under gunicorn each metric value is a slot in a memory-mapped file, and prometheus_client
takes a process-wide lock, checks the process id and packs the value into the file for every
increment: three of them per admission (the counter, the histogram's bucket and its sum) cost
about as much as judging a pod. Here an admission costs a dict update under one lock, and
`take` hands over what was counted since the last call, for the metrics to add at once.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Durations:
    """Observations of one histogram child: per bucket (the last is +Inf, not cumulative),
    and their sum."""

    per_bucket: list[int]
    total: float = 0.0


@dataclass
class Tallied:
    counts: dict[tuple[str, ...], int] = field(default_factory=dict)
    durations: dict[str, Durations] = field(default_factory=dict)


class AdmissionTally:
    def __init__(self, upper_bounds: Sequence[float]) -> None:
        # Finite bounds, ascending; a duration above all of them falls in the +Inf bucket.
        self._bounds = tuple(upper_bounds)
        self._lock = threading.Lock()
        self._tallied = Tallied()

    def count(self, labels: tuple[str, ...], histogram: str | None, seconds: float) -> None:
        """One admission under the counter's `labels`, and, given the `histogram` child it
        belongs to, its duration."""
        with self._lock:
            tallied = self._tallied
            tallied.counts[labels] = tallied.counts.get(labels, 0) + 1
            if histogram is None:
                return
            durations = tallied.durations.get(histogram)
            if durations is None:
                durations = tallied.durations[histogram] = Durations([0] * (len(self._bounds) + 1))
            # The first bound at or above the duration: Prometheus buckets are "le".
            durations.per_bucket[bisect_left(self._bounds, seconds)] += 1
            durations.total += seconds

    def take(self) -> Tallied:
        """What was counted since the last call."""
        with self._lock:
            tallied, self._tallied = self._tallied, Tallied()
        return tallied
