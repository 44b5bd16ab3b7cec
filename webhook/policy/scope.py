"""What a policy matches (`spec.match`) or leaves out (`spec.exclude`): namespace names and
globs, a namespace label selector and an object label selector, all of which must hold."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from webhook.policy.label_selectors import LabelSelector
from webhook.policy.namespace_patterns import PROTECTED_NAMESPACE, NamespacePatterns


class Match(Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"  # it depends on namespace labels nobody could tell us


@dataclass(frozen=True)
class AdmissionTarget:
    """What selection looks at: the namespace, its labels when known, the pod's labels."""

    namespace: str
    namespace_labels: Mapping[str, str] | None
    object_labels: Mapping[str, str]


@dataclass(frozen=True)
class Scope:
    """Absent parts do not constrain; `spec.exclude` is never empty (the loader refuses it).
    Keeping kube-system out of a match that names no namespace is the policy's job."""

    namespaces: NamespacePatterns | None = None
    namespace_selector: LabelSelector | None = None
    object_selector: LabelSelector | None = None

    @property
    def needs_namespace_labels(self) -> bool:
        return self.namespace_selector is not None

    def test(self, target: AdmissionTarget) -> Match:
        if self.namespaces is not None and not self.namespaces.matches(target.namespace):
            return Match.NO
        if self.object_selector is not None and not self.object_selector.matches(
            target.object_labels
        ):
            return Match.NO
        if self.namespace_selector is None:
            return Match.YES
        if target.namespace_labels is None:
            return Match.UNKNOWN
        return Match.YES if self.namespace_selector.matches(target.namespace_labels) else Match.NO

    def overlaps(self, other: Scope) -> bool:
        """Whether one object could be in both scopes, read as `spec.match` scopes (one that
        names no namespace leaves kube-system out)."""
        return (
            _names_overlap(self.namespaces, other.namespaces)
            and _selectors_overlap(self.namespace_selector, other.namespace_selector)
            and _selectors_overlap(self.object_selector, other.object_selector)
        )

    def within(self, other: Scope) -> bool:
        """Whether every object in this scope is in `other` too (a safe approximation: False
        when unsure)."""
        names = other.namespaces is None or (
            self.namespaces is not None and self.namespaces.within(other.namespaces)
        )
        return (
            names
            and _selector_within(self.namespace_selector, other.namespace_selector)
            and _selector_within(self.object_selector, other.object_selector)
        )


def _names_overlap(a: NamespacePatterns | None, b: NamespacePatterns | None) -> bool:
    if a is None and b is None:
        return True
    if a is None or b is None:
        named = a if b is None else b
        assert named is not None
        return bool(named.globs) or bool(named.exact - {PROTECTED_NAMESPACE})
    return a.overlaps(b)


def _selectors_overlap(a: LabelSelector | None, b: LabelSelector | None) -> bool:
    if a is None and b is None:
        return True
    if a is None or b is None:
        present = a if b is None else b
        assert present is not None
        return not present.matches_nothing
    return a.overlaps(b)


def _selector_within(inner: LabelSelector | None, outer: LabelSelector | None) -> bool:
    if outer is None:
        return True
    if inner is None:
        return LabelSelector.build(()).within(outer)
    return inner.within(outer)
