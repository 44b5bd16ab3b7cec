"""Kubernetes resource quantities as exact fractions.

The kube-apiserver serialises `0.25` as `250m`; both, and the YAML number 0.25, must mean the
same amount. Floats never enter the arithmetic: a quantity becomes a `Fraction`.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# The grammar of k8s.io/apimachinery resource.Quantity: a signed decimal number, then a
# binary suffix, a decimal suffix or a decimal exponent ("1e3", "1E-2"). An exponent is
# tried before the bare "E" (exa) suffix.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)
_MAX_EXPONENT = 30
_MAX_LENGTH = 64


_NANO = 10**9
# resource.Quantity holds at most this many of its smallest units; more is no quantity here.
_LARGEST = 2**63 - 1


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Fraction:
    """The exact amount a quantity denotes.

    Accepts the string forms the API uses and, for manifests written by hand, JSON or YAML
    numbers (a float by its shortest text, which decode_envelope makes sure is the text sent).
    Booleans, NaN and infinities are not quantities.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is a boolean, not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a finite number")
        return parse_quantity(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"a quantity is a string or a number, not {type(value).__name__}")
    if len(value) > _MAX_LENGTH:
        raise QuantityError(f"a quantity of {len(value)} characters is too long")
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise QuantityError(f"{value!r} is not a quantity (examples: 1, 0.5, 500m, 16Gi)")
    amount = Fraction(match["number"])
    if match["exponent"]:
        exponent = int(match["exponent"][1:], 10)
        if exponent > _MAX_EXPONENT:
            raise QuantityError(f"{value!r} has an exponent out of range")
        # A number of at most _MAX_LENGTH digits times 10**-100 is far below a nano, as it is
        # with any smaller exponent: either rounds up to one nano below, or is zero.
        exponent = max(exponent, -100)
        amount *= Fraction(10) ** exponent
    else:
        suffix = match["suffix"] or ""
        amount *= _BINARY_SUFFIXES.get(suffix) or _DECIMAL_SUFFIXES[suffix]
    # As ParseQuantity does: a non-zero amount finer than a nano is rounded up to one.
    amount = Fraction(math.ceil(amount * _NANO), _NANO)
    if amount > _LARGEST:
        raise QuantityError(f"{value!r} is larger than a Kubernetes quantity holds")
    return -amount if match["sign"] == "-" else amount


def suffix_of(value: object) -> str:
    """The suffix a quantity string is written with ("Gi", "k", "m"), "" for none (a number,
    or an exponent) and for what is not a quantity."""
    if not isinstance(value, str) or len(value) > _MAX_LENGTH:
        return ""
    match = _QUANTITY.fullmatch(value)
    return (match["suffix"] or "") if match else ""


def is_binary_suffix(suffix: str) -> bool:
    return suffix in _BINARY_SUFFIXES


def format_decimal(amount: Fraction, places: int) -> str:
    """`amount` rounded down to `places` decimals, without trailing zeros ("0.25", "1")."""
    scaled = math.floor(amount * 10**places)
    whole, part = divmod(scaled, 10**places)
    if part == 0:
        return str(whole)
    return f"{whole}.{part:0{places}d}".rstrip("0")


def quantity_or_none(written: object) -> Fraction | None:
    """`written` as a quantity when it is one (a string or an integer, as a manifest may hold
    it: 4096, "4096", "4Ki"), else None."""
    if isinstance(written, bool) or not isinstance(written, str | int):
        return None
    try:
        return parse_quantity(written)
    except QuantityError:
        return None


def same_amount(written: object, amount: str | int) -> bool:
    """Whether `written` is a quantity equal to `amount`."""
    found = quantity_or_none(written)
    return found is not None and found == quantity_or_none(amount)


def plain_int(text: object) -> int | None:
    """The whole number a string of plain ASCII digits says (no sign, no suffix), else None."""
    if isinstance(text, str) and text.isascii() and text.isdigit():
        return int(text)
    return None
