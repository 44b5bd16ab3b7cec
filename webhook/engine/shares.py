"""Sizing a share of a GPU in the policy's VRAM units, and what its container is told."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from webhook.engine.findings import ShareIntent, Violation
from webhook.policy.frameworks import FRAMEWORK_HEADROOM_MIB
from webhook.policy.model import GpuModel, Sharing
from webhook.quantity import format_decimal

MIB = 2**20
_FRACTION_PLACES = 4
_MAX_FRACTION_PLACES = 9


@dataclass(frozen=True)
class SizedShare:
    intent: ShareIntent
    model: GpuModel
    units: int
    mib: int

    @property
    def fraction_of_card(self) -> Fraction:
        """The share actually reserved, of all the card's memory (frameworks take a fraction of
        all of it), which rounding and headroom make no larger than the one asked."""
        return Fraction(self.mib, self.model.memory_mib)


def size_share(intent: ShareIntent, model: GpuModel, sharing: Sharing) -> SizedShare | Violation:
    where = f"{intent.container.label}:"
    if intent.vram_units is not None:
        units = intent.vram_units
        mib = units * sharing.mib_per_unit
        if mib > model.usable_mib:
            asked = (
                f"{intent.asked} ({units} {sharing.unit})"
                if intent.source in ("memory", "annotation")
                else f"{intent.resource} {intent.written} {sharing.unit}"
            )
            return Violation(
                "share-too-large",
                f"{where} {asked} is more than a {model.product} has ({_memory(model)})",
            )
        return SizedShare(intent, model, units, mib)
    assert intent.fraction is not None
    units = sharing.units_for(intent.fraction, model)
    if units == 0:
        return Violation(
            "share-too-small",
            f'{where} "{intent.written}" of a {model.product} ({_memory(model)}) is less '
            f"than 1 {sharing.unit} of {sharing.vram_resource}: ask for at least "
            f"{sharing.mib_per_unit}/{model.usable_mib} of a GPU",
        )
    return SizedShare(intent, model, units, units * sharing.mib_per_unit)


def _memory(model: GpuModel) -> str:
    if model.reserved_mib:
        return f"{model.usable_mib} MiB besides the {model.reserved_mib} the driver keeps"
    return f"{model.memory_mib} MiB"


def placeholder_values(share: SizedShare, sharing: Sharing, seen_mib: int) -> dict[str, str]:
    """The values an env template may use, all derived from the reserved amount, so that a
    second pass over a rewritten pod computes the very same strings. `seen_mib`: the device
    memory a process of the container sees (the card, a MIG slice, or HAMi-core's limit), of
    which a framework's fraction is taken. Every limit is rounded down, never past the share."""
    framework_mib = max(share.mib - FRAMEWORK_HEADROOM_MIB, 0)
    return {
        "fraction": _fraction_text(share.fraction_of_card),
        "percent": str(max(1, int(share.fraction_of_card * 100))),
        "amount": str(share.units),
        "unit": sharing.unit,
        "mib": str(share.mib),
        "bytes": str(share.mib * MIB),
        "model": share.model.product,
        "frameworkFraction": _fraction_text(Fraction(framework_mib, seen_mib)),
        "frameworkMiB": str(framework_mib),
        "frameworkBytes": str(framework_mib * MIB),
    }


def _fraction_text(fraction: Fraction) -> str:
    """Four decimals, rounded down; more where four would say 0 (a share below 1/10,000 of a
    card), never rounded up."""
    for places in range(_FRACTION_PLACES, _MAX_FRACTION_PLACES + 1):
        text = format_decimal(fraction, places)
        if text != "0":
            return text
    return "0"
