"""Admissions counted in the worker's memory, to be added to the Prometheus metrics in batches.

Under gunicorn each metric value is a slot in a memory-mapped file, and prometheus_client
takes a process-wide lock, checks the process id and packs the value into the file for every
increment: three of them per admission (the counter, the histogram's bucket and its sum) cost
about as much as judging a pod. Here an admission costs a dict update under one lock, and
`take` hands over what was counted since the last call, for the metrics to add at once: one
increment per counter, one observation (two increments) per duration, on the publishing
thread rather than the request's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Tallied:
    counts: dict[tuple[str, ...], int] = field(default_factory=dict)
    # The durations of each histogram child, to be observed one by one (prometheus_client has
    # no call that observes many at once, and its children's parts are private).
    durations: dict[str, list[float]] = field(default_factory=dict)


class AdmissionTally:
    def __init__(self) -> None:
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
                durations = tallied.durations[histogram] = []
            durations.append(seconds)

    def take(self) -> Tallied:
        """What was counted since the last call."""
        with self._lock:
            tallied, self._tallied = self._tallied, Tallied()
        return tallied
