"""kai_portion.py: KAI Scheduler's arithmetic for a share, one table per function, each value
worked out as KAI works it (a card's label floored to 100 MiB for scheduling, two decimals
kept of a portion, float64 where KAI computes in it)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from webhook.engine.backends.kai_portion import (
    PORTION_PLACES,
    fraction_portion,
    fraction_reserved_mib,
    has_places_kai_drops,
    isolator_limit_mib,
    kept_fraction,
    memory_portion,
    scheduling_memory,
)


def test_kai_keeps_two_decimals_of_a_portion() -> None:
    assert PORTION_PLACES == 2


@pytest.mark.parametrize(
    ("label", "counted"),
    [(40960, 40900), (15360, 15300), (81559, 81500), (143771, 143700), (40900, 40900), (99, 0)],
    ids=[
        "an A100 40GB's 40960 MiB count as 40900",
        "a T4's 15360 MiB count as 15300",
        "an H100's 81559 MiB count as 81500",
        "an H200's 143771 MiB count as 143700",
        "a whole hundred stays",
        "under 100 MiB counts as none",
    ],
)
def test_scheduling_memory_floors_the_label_to_100_mib(label: int, counted: int) -> None:
    assert scheduling_memory(label) == counted


@pytest.mark.parametrize(
    ("fraction", "kept"),
    [
        (Fraction("0.125"), Fraction("0.12")),
        (Fraction("0.999"), Fraction("0.99")),
        (Fraction("0.375"), Fraction("0.37")),
        (Fraction(1, 3), Fraction("0.33")),
        (Fraction(2, 3), Fraction("0.66")),
        (Fraction("0.25"), Fraction("0.25")),
        (Fraction("0.01"), Fraction("0.01")),
        (Fraction("0.004"), Fraction(0)),
    ],
    ids=[
        "0.125 keeps 0.12, rounded down",
        "0.999 keeps 0.99, never a whole card",
        "0.375 keeps 0.37",
        "a third keeps 0.33",
        "two thirds keep 0.66, not 0.67",
        "a quarter is kept whole",
        "a hundredth is kept whole",
        "under a hundredth keeps nothing",
    ],
)
def test_kept_fraction_keeps_two_decimals_rounding_down(fraction: Fraction, kept: Fraction) -> None:
    assert kept_fraction(fraction) == kept


@pytest.mark.parametrize(
    ("fraction", "drops"),
    [
        (Fraction("0.125"), True),
        (Fraction(1, 3), True),
        (Fraction("0.004"), True),
        (Fraction("0.25"), False),
        (Fraction("0.5"), False),
        (Fraction("0.10"), False),
    ],
    ids=[
        "0.125 has a third decimal",
        "a third has endless decimals",
        "0.004 has only places KAI drops",
        "0.25 has two",
        "0.5 has one",
        "a trailing zero is no place dropped",
    ],
)
def test_has_places_kai_drops_when_more_than_two_decimals(fraction: Fraction, drops: bool) -> None:
    assert has_places_kai_drops(fraction) is drops


@pytest.mark.parametrize(
    ("fraction", "label", "reserved"),
    [
        (Fraction("0.25"), 40960, 10225),
        (Fraction("0.5"), 81559, 40750),
        (Fraction("0.25"), 15360, 3825),
        (Fraction("0.33"), 40960, 13497),
        (Fraction("0.57"), 40960, 23312),
        (Fraction("0.69"), 143771, 99152),
    ],
    ids=[
        "a quarter of an A100 40GB holds a quarter of 40900",
        "half an H100 holds half of 81500",
        "a quarter of a T4 holds a quarter of 15300",
        "0.33 of an A100 40GB holds 13497",
        "0.57 of 40900 is 23313 exactly, and 23312 in float64 truncated, as KAI holds",
        "0.69 of 143700 is 99153 exactly, and 99152 in float64 truncated, as KAI holds",
    ],
)
def test_fraction_reserved_mib_is_the_fraction_of_the_floored_card_truncated_in_float64(
    fraction: Fraction, label: int, reserved: int
) -> None:
    assert fraction_reserved_mib(fraction, label) == reserved


@pytest.mark.parametrize(
    ("mib", "label", "portion"),
    [
        (4096, 15360, "0.27"),
        (4096, 40960, "0.11"),
        (6000, 40960, "0.15"),
        (10225, 40960, "0.25"),
        (40900, 40960, "1.00"),
        (1, 40960, "0.01"),
        (2863, 40960, "0.08"),
    ],
    ids=[
        "4096 MiB of a T4 is 0.2677 of 15300, passed on as 0.27 (KAI's own example)",
        "4096 MiB of an A100 40GB is 0.1001 of 40900, passed on as 0.11",
        "6000 MiB of an A100 40GB is 0.1467, passed on as 0.15",
        "a whole hundredth of the floored card is passed on as it is",
        "all the memory KAI counts is 1.00",
        "one MiB is rounded up to a hundredth",
        "2863 of 40900 is 0.07 exactly, a hair above in float64, and KAI passes on 0.08",
    ],
)
def test_memory_portion_is_the_memory_over_the_floored_card_rounded_up_to_a_hundredth(
    mib: int, label: int, portion: str
) -> None:
    assert memory_portion(mib, label) == portion


@pytest.mark.parametrize(
    ("fraction", "portion"),
    [
        (Fraction("0.12"), "0.12"),
        (Fraction("0.5"), "0.50"),
        (Fraction("0.05"), "0.05"),
        (Fraction(0), "0.00"),
        (Fraction("0.99"), "0.99"),
    ],
    ids=[
        "0.12 prints as 0.12",
        "a half prints with two decimals",
        "a leading zero decimal stays",
        "nothing prints as 0.00",
        "0.99 prints as 0.99",
    ],
)
def test_fraction_portion_prints_a_kept_fraction_as_kai_prints_it(
    fraction: Fraction, portion: str
) -> None:
    assert fraction_portion(fraction) == portion


@pytest.mark.parametrize(
    ("portion", "label", "limit"),
    [
        ("0.25", 40960, 10240),
        ("0.12", 40960, 4915),
        ("0.27", 15360, 4147),
        ("0.15", 40960, 6144),
        ("0.50", 143771, 71885),
        ("1.00", 81559, 81559),
        ("0.00", 40960, None),
    ],
    ids=[
        "a quarter of an A100 40GB's unfloored label is 10240",
        "0.12 of 40960 is 4915.2, truncated",
        "0.27 of a T4 is 4147 (KAI's own example, 4147m)",
        "0.15 of 40960 is 6144",
        "half an H200 is 71885, truncated from 71885.5",
        "the whole portion is the whole label",
        "0.00 gets no cap at all",
    ],
)
def test_isolator_limit_mib_is_the_unfloored_label_times_the_portion_truncated(
    portion: str, label: int, limit: int | None
) -> None:
    assert isolator_limit_mib(portion, label) == limit
