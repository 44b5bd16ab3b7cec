"""shares.py: a fraction of a card, or an amount of memory, sized in the policy's VRAM units,
and the values an env template is given for the share."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from tests.unit.engine.builders import A100, H200, T4, quarter_intent, sharing, sized, vram_intent
from webhook.engine.findings import ShareIntent, Violation
from webhook.engine.shares import SizedShare, placeholder_values, size_share
from webhook.policy.model import GpuModel

T4_WITH_HEADROOM = replace(T4, reserved_mib=448)  # 14912 MiB usable


@pytest.mark.parametrize(
    ("written", "model", "unit", "units", "mib"),
    [
        ("0.25", T4, "MiB", 3840, 3840),
        # 143771 / 4 = 35942.75: rounded down, so that four quarters fit the card.
        ("0.25", H200, "MiB", 35942, 35942),
        ("0.333", A100, "MiB", 13639, 13639),
        # 3840 MiB is 3.75 GiB: 3 whole GiB, never more than was asked.
        ("0.25", T4, "GiB", 3, 3072),
        ("0.5", A100, "GiB", 20, 20480),
        # The driver's 448 MiB are left out: a quarter of 14912.
        ("0.25", T4_WITH_HEADROOM, "MiB", 3728, 3728),
    ],
    ids=[
        "a quarter of a T4 in MiB",
        "a quarter of an H200 rounds down to a whole MiB",
        "a third of an A100 rounds down",
        "a quarter of a T4 in GiB rounds down to whole GiB",
        "half an A100 in GiB",
        "the memory the driver keeps is not shared",
    ],
)
def test_size_share_rounds_a_fraction_down_to_whole_units(
    written: str, model: GpuModel, unit: str, units: int, mib: int
) -> None:
    share = size_share(quarter_intent(written), model, sharing(unit=unit))
    assert isinstance(share, SizedShare)
    assert (share.units, share.mib, share.model) == (units, mib, model)


@pytest.mark.parametrize(
    ("units", "unit", "mib"),
    [(4096, "MiB", 4096), (4, "GiB", 4096), (15360, "MiB", 15360)],
    ids=["MiB as written", "GiB counted as 1024 MiB each", "the whole card is still a share"],
)
def test_size_share_takes_an_amount_of_memory_as_its_units(units: int, unit: str, mib: int) -> None:
    share = size_share(vram_intent(units), T4, sharing(unit=unit))
    assert isinstance(share, SizedShare)
    assert (share.units, share.mib) == (units, mib)


@pytest.mark.parametrize(
    ("intent", "model", "unit", "message"),
    [
        (
            vram_intent(15361),
            T4,
            "MiB",
            'container "c": example.com/vram 15361 MiB is more than a Tesla-T4 has (15360 MiB)',
        ),
        (
            vram_intent(16, "memory", "16Gi"),
            T4,
            "GiB",
            'container "c": example.com/vram=16Gi (16 GiB) is more than a Tesla-T4 has (15360 MiB)',
        ),
        (
            vram_intent(15000),
            T4_WITH_HEADROOM,
            "MiB",
            'container "c": example.com/vram 15000 MiB is more than a Tesla-T4 has '
            "(14912 MiB besides the 448 the driver keeps)",
        ),
    ],
    ids=[
        "one MiB more than a T4",
        "an amount of memory is quoted as written",
        "the driver's memory is not the share's",
    ],
)
def test_size_share_refuses_more_memory_than_the_card_has(
    intent: ShareIntent, model: GpuModel, unit: str, message: str
) -> None:
    assert size_share(intent, model, sharing(unit=unit)) == Violation("share-too-large", message)


@pytest.mark.parametrize(
    ("written", "unit", "message"),
    [
        (
            "0.00005",
            "MiB",
            'container "c": "0.00005" of a Tesla-T4 (15360 MiB) is less than 1 MiB of '
            "example.com/vram: ask for at least 1/15360 of a GPU",
        ),
        (
            "0.05",
            "GiB",
            'container "c": "0.05" of a Tesla-T4 (15360 MiB) is less than 1 GiB of '
            "example.com/vram: ask for at least 1024/15360 of a GPU",
        ),
    ],
    ids=["below one MiB", "768 MiB is below one GiB"],
)
def test_size_share_refuses_a_fraction_below_one_unit(
    written: str, unit: str, message: str
) -> None:
    assert size_share(quarter_intent(written), T4, sharing(unit=unit)) == Violation(
        "share-too-small", message
    )


@pytest.mark.parametrize(
    ("share", "fraction"),
    [
        (sized(3840), Fraction(1, 4)),
        # Of all the card's memory, reserved included: what frameworks take a fraction of.
        (replace(sized(3728), model=T4_WITH_HEADROOM), Fraction(3728, 15360)),
        (sized(35942, H200), Fraction(35942, 143771)),
    ],
    ids=["a quarter of a T4", "of the whole card, the driver's part too", "of an H200"],
)
def test_sized_share_fraction_of_card_is_of_all_its_memory(
    share: SizedShare, fraction: Fraction
) -> None:
    assert share.fraction_of_card == fraction


def test_placeholder_values_of_a_quarter_of_a_t4_seen_whole() -> None:
    values = placeholder_values(sized(3840), sharing(), 15360)
    assert values == {
        "fraction": "0.25",
        "percent": "25",
        "amount": "3840",
        "unit": "MiB",
        "mib": "3840",
        "bytes": str(3840 * 2**20),
        "model": "Tesla-T4",
        # (3840 - 512) / 15360 = 0.21666...: four decimals, rounded down.
        "frameworkFraction": "0.2166",
        "frameworkMiB": "3328",
        "frameworkBytes": str(3328 * 2**20),
    }


@pytest.mark.parametrize(
    ("share", "seen", "key", "value"),
    [
        # HAMi-core reports the share as the device's total: 3584 of 4096.
        (sized(4096, A100), 4096, "frameworkFraction", "0.875"),
        # 1/143771 is 0.0000069...: more places rather than "0", still rounded down.
        (sized(1, H200), 143771, "fraction", "0.000006"),
        (sized(1, H200), 143771, "percent", "1"),
        # Nothing is left beside the CUDA context: the framework is given nothing.
        (sized(512), 15360, "frameworkMiB", "0"),
        (sized(512), 15360, "frameworkFraction", "0"),
        # Smaller than the headroom: still nothing, never a negative amount.
        (sized(256), 15360, "frameworkMiB", "0"),
        (sized(256), 15360, "frameworkFraction", "0"),
        (sized(15359), 15360, "fraction", "0.9999"),
        (sized(15360), 15360, "fraction", "1"),
    ],
    ids=[
        "of what a process sees under a hard limit",
        "a tiny share keeps its digits",
        "a tiny share is at least one percent",
        "a share no larger than the headroom gives frameworks nothing",
        "and a fraction of nothing",
        "a share below the headroom gives frameworks nothing, not less",
        "and a fraction of nothing, not a negative one",
        "never rounded up to the whole card",
        "the whole card is 1",
    ],
)
def test_placeholder_values_are_rounded_down_never_past_the_share(
    share: SizedShare, seen: int, key: str, value: str
) -> None:
    assert placeholder_values(share, sharing(), seen)[key] == value


def test_placeholder_values_say_the_policys_unit() -> None:
    share = replace(sized(3072), units=3)
    values = placeholder_values(share, sharing(unit="GiB"), 15360)
    assert (values["amount"], values["unit"], values["mib"]) == ("3", "GiB", "3072")
