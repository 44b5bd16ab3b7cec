"""What a node's labels say about its GPUs: how many cards, and how much memory each has.

The labellers disagree on units and spelling (see the fixtures in tests/fixtures/node-labels):
NVIDIA GPU feature discovery writes `nvidia.com/gpu.memory` in MiB per card (rounded down) and
`nvidia.com/gpu.count`; AMD's node labeller writes `amd.com/gpu.vram` in GiB rounded to the
nearest (`32G`), and counts cards of each size in a label whose key holds the size. MIG nodes
are left out: a slice's memory is fixed by its profile, not shared. A label that is missing means
"unknown", never 0 or 1, and a label that does not parse makes the node unreadable rather than
guessed at. An administrator can state any node's VRAM with `OVERRIDE_LABEL`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from webhook.policy.model import Sharing

# The node's whole VRAM to share, in MiB, for nodes no labeller describes (or describes wrong).
OVERRIDE_LABEL = "gpu-admission.example.com/vram-mib"

GFD_COUNT = "nvidia.com/gpu.count"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_PRODUCT = "nvidia.com/gpu.product"
# Mixed-strategy MIG devices: nvidia.com/mig-1g.10gb.count and the like.
GFD_MIG_COUNT = re.compile(r"^nvidia\.com/mig-(?P<profile>[^/]+)\.count$")
MIG_PRODUCT_MARK = "-MIG-"

AMD_VRAM_LABELS = ("amd.com/gpu.vram", "beta.amd.com/gpu.vram")
AMD_VRAM_IN_KEY = re.compile(r"^(?:beta\.)?amd\.com/gpu\.vram\.(?P<size>[^/]+)$")
AMD_SIZE = re.compile(r"^(?P<gib>[0-9]+)G$")
AMD_GPU_RESOURCE = "amd.com/gpu"

WHOLE_NUMBER = re.compile(r"^[0-9]+$")
MIB_PER_GIB = 1024

# The labels `read_gpus` reads, besides the policy's model label: what a node keeps of its labels
# (see node_reading). A test spies on `read_gpus` and fails on a label read but not named here.
READ_LABELS = frozenset((OVERRIDE_LABEL, GFD_COUNT, GFD_MEMORY, GFD_PRODUCT, *AMD_VRAM_LABELS))
READ_LABEL_FAMILIES = (GFD_MIG_COUNT, AMD_VRAM_IN_KEY)
READ_RESOURCES = frozenset((AMD_GPU_RESOURCE,))


def reads_label(key: str) -> bool:
    """Whether `read_gpus` may read the label `key`, whatever the policy."""
    return key in READ_LABELS or any(family.match(key) for family in READ_LABEL_FAMILIES)


@dataclass(frozen=True)
class Cards:
    """`count` cards of `card_mib` MiB each, as `source` says. `stated` marks the override
    label: an administrator's figure for the whole node, which no multi-card rule second-guesses."""

    count: int
    card_mib: int
    source: str
    model: str | None = None
    stated: bool = False


@dataclass(frozen=True)
class NoCards:
    """The node has no GPU memory to share; `reason` says why."""

    reason: str


@dataclass(frozen=True)
class Unreadable:
    """Labels that claim GPUs but do not say how many or how large: the node is left as it is."""

    reason: str


NodeGpus = Cards | NoCards | Unreadable


def read_gpus(
    labels: Mapping[str, str], capacity: Mapping[str, object], sharing: Sharing
) -> NodeGpus:
    """The node's cards by its labels (and, for AMD, its advertised card count), measured for
    `sharing`: its model label names the product and its catalogue fills in a missing size."""
    if OVERRIDE_LABEL in labels:
        return _stated(labels[OVERRIDE_LABEL])
    mig = _mig(labels)
    if mig is not None:
        return NoCards(f"MIG is on ({mig}): MIG slices are not shared by memory")
    if any(key in labels for key in (GFD_COUNT, GFD_MEMORY, GFD_PRODUCT)):
        return _nvidia(labels, sharing)
    return _amd(labels, capacity) or NoCards("no GPU labels")


def _stated(value: str) -> NodeGpus:
    if not WHOLE_NUMBER.match(value):
        return Unreadable(f"{OVERRIDE_LABEL}={value!r} is not a whole number of MiB")
    return Cards(1, int(value), f"{OVERRIDE_LABEL}={value} MiB", stated=True)


def _mig(labels: Mapping[str, str]) -> str | None:
    """The label that shows MIG on: GFD's single strategy renames the product
    (`…-MIG-1g.10gb`, `…-MIG-INVALID`), the mixed one counts MIG devices per profile."""
    product = labels.get(GFD_PRODUCT, "")
    if MIG_PRODUCT_MARK in product:
        return f"{GFD_PRODUCT}={product}"
    for key, value in sorted(labels.items()):
        if GFD_MIG_COUNT.match(key) and value not in ("", "0"):
            return f"{key}={value}"
    return None


def _nvidia(labels: Mapping[str, str], sharing: Sharing) -> NodeGpus:
    count = _whole(labels, GFD_COUNT)
    if isinstance(count, Unreadable):
        return count
    if count is None:
        return Unreadable(f"{GFD_COUNT} is missing, so the number of cards is unknown")
    if count == 0:
        return NoCards(f"{GFD_COUNT} is 0")
    model = labels.get(sharing.model_label)
    memory = _whole(labels, GFD_MEMORY)
    if isinstance(memory, Unreadable):
        return memory
    if memory:
        return Cards(count, memory, f"{count} x {GFD_MEMORY}={memory} MiB", model)
    known = sharing.models.get(model) if model is not None else None
    if known is None:
        said = "missing" if memory is None else "0"
        return Unreadable(
            f"{GFD_MEMORY} is {said} and {sharing.model_label}={model or '(none)'} is not in the "
            "policy's models"
        )
    how = f"{count} x the catalogue's {model} ({known.memory_mib} MiB)"
    return Cards(count, known.memory_mib, how, model)


def _amd(labels: Mapping[str, str], capacity: Mapping[str, object]) -> NodeGpus | None:
    """AMD's node labeller: `amd.com/gpu.vram: 32G` when every card has one size, and
    `<prefix>/gpu.vram.<size>: <cards of that size>` (always in the beta form, and in the
    amd.com form when sizes differ). It has no card count of its own: the device plugin's
    `amd.com/gpu` in status.capacity gives it, partitions counted as cards."""
    by_size: dict[str, str] = {}
    for key, value in labels.items():
        found = AMD_VRAM_IN_KEY.match(key)
        if found:
            by_size[found["size"]] = value
    single = next((labels[key] for key in AMD_VRAM_LABELS if key in labels), None)
    if single is None and not by_size:
        return None
    if len(by_size) > 1:
        sizes = ", ".join(sorted(by_size))
        return Unreadable(f"AMD cards of different sizes ({sizes}) share no single amount")
    size = single if single is not None else next(iter(by_size))
    parsed = AMD_SIZE.match(size)
    if parsed is None:
        return Unreadable(f"AMD VRAM {size!r} is not a size in G (GiB)")
    card_mib = int(parsed["gib"]) * MIB_PER_GIB
    labelled = by_size.get(size)
    advertised = capacity.get(AMD_GPU_RESOURCE)
    counted = None if advertised is None or str(advertised) == "0" else str(advertised)
    # The labeller's own count describes the size it labels; the device plugin's is a fallback
    # (0 while it registers, which must not read as "no cards").
    count = labelled if labelled is not None else counted
    if count is None:
        return Unreadable(
            f"the AMD labels give no card count and status.capacity has no {AMD_GPU_RESOURCE}"
        )
    if labelled is not None and counted is not None and labelled != counted:
        return Unreadable(
            f"the AMD labeller counts {labelled} cards of {size} and the device plugin "
            f"{counted}: state the node's VRAM with {OVERRIDE_LABEL}"
        )
    if not WHOLE_NUMBER.match(count):
        return Unreadable(f"the AMD card count {count!r} is not a whole number")
    if int(count) == 0:
        return NoCards("no AMD cards (the count is 0)")
    return Cards(int(count), card_mib, f"{count} x AMD VRAM {size} ({card_mib} MiB)")


def _whole(labels: Mapping[str, str], key: str) -> int | Unreadable | None:
    value = labels.get(key)
    if value is None:
        return None
    if not WHOLE_NUMBER.match(value):
        return Unreadable(f"{key}={value!r} is not a whole number")
    return int(value)
