"""Kubernetes label selectors (`matchLabels` and `matchExpressions`), as sets of label maps.

Each key of a selector allows a set of values, where one possible "value" is the key being
absent (`NotIn` and `DoesNotExist` match objects without the key, as in Kubernetes). Such a set
is either finite or the complement of a finite set, so the sets close under intersection and
the load-time questions "can one object match both selectors?" and "does every object this
selector matches also match that one?" have exact answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

ABSENT = None  # the "value" of a key a label map does not have
Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]


@dataclass(frozen=True)
class ValueSet:
    """`members` when finite, else every value (and absence) except `members`."""

    members: frozenset[str | None]
    finite: bool

    @classmethod
    def of(cls, values: Iterable[str | None]) -> ValueSet:
        return cls(frozenset(values), True)

    @classmethod
    def all_but(cls, values: Iterable[str | None]) -> ValueSet:
        return cls(frozenset(values), False)

    def __contains__(self, value: str | None) -> bool:
        return (value in self.members) is self.finite

    @property
    def empty(self) -> bool:
        return self.finite and not self.members

    def __and__(self, other: ValueSet) -> ValueSet:
        if self.finite and other.finite:
            return ValueSet.of(self.members & other.members)
        if self.finite:
            return ValueSet.of(self.members - other.members)
        if other.finite:
            return ValueSet.of(other.members - self.members)
        return ValueSet.all_but(self.members | other.members)

    def __le__(self, other: ValueSet) -> bool:
        if self.finite and other.finite:
            return self.members <= other.members
        if self.finite:
            return not (self.members & other.members)
        if other.finite:
            return False
        return other.members <= self.members


ANY_VALUE = ValueSet.all_but(())


def requirement(operator: Operator, values: Iterable[str] = ()) -> ValueSet:
    """The values a `matchExpressions` entry allows for its key."""
    if operator == "In":
        return ValueSet.of(values)
    if operator == "NotIn":
        return ValueSet.all_but(values)
    if operator == "Exists":
        return ValueSet.all_but([ABSENT])
    return ValueSet.of([ABSENT])


@dataclass(frozen=True)
class LabelSelector:
    """The allowed values of each key the selector constrains; other keys are free."""

    keys: Mapping[str, ValueSet]

    @classmethod
    def build(cls, constraints: Iterable[tuple[str, ValueSet]]) -> LabelSelector:
        keys: dict[str, ValueSet] = {}
        for key, allowed in constraints:
            keys[key] = keys[key] & allowed if key in keys else allowed
        return cls(MappingProxyType(keys))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key, ABSENT) in allowed for key, allowed in self.keys.items())

    @property
    def matches_nothing(self) -> bool:
        return any(allowed.empty for allowed in self.keys.values())

    def overlaps(self, other: LabelSelector) -> bool:
        """Whether some label map matches both selectors."""
        return all(
            not (allowed & other.keys[key]).empty
            for key, allowed in self.keys.items()
            if key in other.keys
        ) and not (self.matches_nothing or other.matches_nothing)

    def within(self, other: LabelSelector) -> bool:
        """Whether every label map this selector matches is matched by `other` too."""
        if self.matches_nothing:
            return True
        return all(self.keys.get(key, ANY_VALUE) <= allowed for key, allowed in other.keys.items())
