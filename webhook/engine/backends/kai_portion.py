"""What KAI Scheduler really gives a share, in its own arithmetic (KAI-Scheduler v0.17.0+9,
d5bc503a), so that the record and the env never promise more than it does.

- It reads a card's memory from the node label `nvidia.com/gpu.memory`, floored to 100 MiB
  for scheduling (`getNodeGpuMemory`, node_info.go L660-674).
- It reserves, for `gpu-memory`, exactly the MiB asked; for `gpu-fraction`, the fraction of
  that floored memory, truncated (`GetResourceGpuMemory`, node_info.go L640-646).
- It passes the share on as a portion printed with `%.2f` (cache.go L379): the fraction, or
  for `gpu-memory` the memory over the floored card, rounded *up* to a hundredth
  (`getGpuMemoryFractionalOnNode`, gpu_sharing_node_info.go L355-358).
- Its HAMi-core isolator caps the container at the unfloored label times that printed
  portion, truncated (`hami_core.go` L52-78), and writes no cap at all for "0.00".

KAI computes in float64, and so does this module where KAI does: a quotient that is a whole
hundredth in exact arithmetic may land a hair above it in floating point, and KAI then rounds
it up to the next hundredth.
"""

from __future__ import annotations

import math
from fractions import Fraction

# The decimals KAI keeps of a portion.
PORTION_PLACES = 2
_HUNDREDTH = Fraction(1, 10**PORTION_PLACES)


def scheduling_memory(label_mib: int) -> int:
    """A card's memory as KAI's scheduler counts it: the label, floored to 100 MiB."""
    return label_mib - label_mib % 100


def kept_fraction(fraction: Fraction) -> Fraction:
    """The largest fraction KAI keeps whole (two decimals) that is no more than `fraction`:
    what the webhook writes, so that the share never grows past what was asked."""
    return math.floor(fraction / _HUNDREDTH) * _HUNDREDTH


def has_places_kai_drops(fraction: Fraction) -> bool:
    return fraction != kept_fraction(fraction)


def fraction_reserved_mib(fraction: Fraction, label_mib: int) -> int:
    """What the scheduler holds on the card for a `gpu-fraction` (the annotation as parsed)."""
    return int(float(fraction) * scheduling_memory(label_mib))


def memory_portion(mib: int, label_mib: int) -> str:
    """The portion KAI passes on for `gpu-memory: mib`, as it prints it."""
    exact = float(mib) / float(scheduling_memory(label_mib))
    return f"{math.ceil(exact * 100) / 100:.2f}"


def fraction_portion(fraction: Fraction) -> str:
    return f"{float(fraction):.2f}"


def isolator_limit_mib(portion: str, label_mib: int) -> int | None:
    """The cap KAI's HAMi-core isolator gives the container, in MiB; None for no cap."""
    kept = float(portion)
    if kept <= 0:
        return None
    return int(float(label_mib) * kept)
