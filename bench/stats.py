"""Order statistics of samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile `p` (0 < p <= 100) of `values`, in any order."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    rank = max(math.ceil(p / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator ÷ denominator, or None when either is missing or the denominator is not > 0."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator
