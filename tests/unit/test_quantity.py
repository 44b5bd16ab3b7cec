from fractions import Fraction

import pytest

from webhook.quantity import (
    QuantityError,
    format_decimal,
    is_binary_suffix,
    parse_quantity,
    suffix_of,
)

PARSED = [
    ("250m", Fraction(1, 4)),
    ("0.25", Fraction(1, 4)),
    (".25", Fraction(1, 4)),
    ("1.", Fraction(1)),
    ("+2", Fraction(2)),
    ("-1", Fraction(-1)),
    ("500m", Fraction(1, 2)),
    ("125m", Fraction(1, 8)),
    ("333m", Fraction(333, 1000)),
    ("10u", Fraction(1, 100_000)),
    ("5n", Fraction(5, 10**9)),
    ("2k", Fraction(2000)),
    ("16Gi", Fraction(16 * 2**30)),
    ("1Mi", Fraction(2**20)),
    ("1E", Fraction(10**18)),
    ("1e3", Fraction(1000)),
    ("25e-2", Fraction(1, 4)),
    ("1E-3", Fraction(1, 1000)),
    (2, Fraction(2)),
    (0.25, Fraction(1, 4)),
    (0.1, Fraction(1, 10)),
]


@pytest.mark.parametrize(("text", "amount"), PARSED, ids=[repr(t) for t, _ in PARSED])
def test_parses_every_form_to_the_exact_amount(text: object, amount: Fraction) -> None:
    assert parse_quantity(text) == amount


REJECTED = [
    "",
    "abc",
    "a-quarter",
    "1/4",
    "0.25 gpu",
    "1Kb",
    "--1",
    "1e",
    "e3",
    "1e99",
    "1.2.3",
    " 2",
    "0.5\n",
    "\u0660.\u0665",  # Arabic-Indic digits: Kubernetes reads ASCII digits only
    "\uff10.\uff12\uff15",  # full-width digits
]


@pytest.mark.parametrize("text", REJECTED)
def test_rejects_what_is_not_a_quantity(text: str) -> None:
    with pytest.raises(QuantityError, match=r"not a quantity|out of range"):
        parse_quantity(text)


def test_a_huge_number_is_refused_without_computing_it() -> None:
    with pytest.raises(QuantityError, match="too long"):
        parse_quantity("1" * 5000)


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_rejects_values_of_other_types(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


DECIMALS = [
    (Fraction(1, 4), 4, "0.25"),
    (Fraction(1, 2), 4, "0.5"),
    (Fraction(1), 4, "1"),
    (Fraction(1, 3), 4, "0.3333"),
    (Fraction(2, 3), 4, "0.6666"),
    (Fraction(13, 40), 4, "0.325"),
    (Fraction(1, 100_000), 4, "0"),
    (Fraction(5, 2), 0, "2"),
]


@pytest.mark.parametrize(("amount", "places", "text"), DECIMALS, ids=[t for *_, t in DECIMALS])
def test_format_decimal_rounds_down(amount: Fraction, places: int, text: str) -> None:
    assert format_decimal(amount, places) == text


SUFFIXES = [
    ("4Gi", "Gi"),
    ("0.5Ki", "Ki"),
    ("250m", "m"),
    ("2k", "k"),
    ("1E", "E"),
    ("1e3", ""),
    ("1", ""),
    (1, ""),
    ("Gi", ""),
    ("4 Gi", ""),
]


@pytest.mark.parametrize(("value", "suffix"), SUFFIXES, ids=[repr(v) for v, _ in SUFFIXES])
def test_the_suffix_a_quantity_is_written_with(value: object, suffix: str) -> None:
    assert suffix_of(value) == suffix
    assert is_binary_suffix(suffix) == suffix.endswith("i")


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        pytest.param("1e-12", Fraction(1, 10**9), id="finer than a nano: rounded up to one"),
        pytest.param("-1e-12", Fraction(-1, 10**9), id="negative: away from zero"),
        pytest.param("1E-400", Fraction(1, 10**9), id="any exponent below: still a nano"),
        pytest.param("0e-999999", Fraction(0), id="zero with any exponent"),
    ],
)
def test_amounts_finer_than_a_nano_round_up_as_parse_quantity_does(
    text: str, amount: Fraction
) -> None:
    assert parse_quantity(text) == amount
