"""What a policy matches (`spec.match`) or leaves out (`spec.exclude`): namespace names and
globs, a namespace label selector and an object label selector, all of which must hold."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from webhook.policy.label_selectors import LabelSelector
from webhook.policy.namespace_patterns import PROTECTED_NAMESPACE, NamespacePatterns


class Match(Enum):
    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"  # it depends on namespace labels nobody could tell us


# The GPU models a pod names on a node label (given the names that label may take, for a
# NotIn), or None where it names none.
ModelsNamed = Callable[[str, frozenset[str]], frozenset[str] | None]


def no_models_named(label: str, names: frozenset[str]) -> frozenset[str] | None:
    return None


@dataclass(frozen=True)
class AdmissionTarget:
    """What selection looks at: the namespace, its labels when known, the pod's labels, and
    the GPU models the pod names (read only where a policy selects by them)."""

    namespace: str
    namespace_labels: Mapping[str, str] | None
    object_labels: Mapping[str, str]
    models_named: ModelsNamed = field(default=no_models_named)


@dataclass(frozen=True)
class Scope:
    """Absent parts do not constrain; `spec.exclude` is never empty (the loader refuses it).
    Keeping kube-system out of a match that names no namespace is the policy's job."""

    namespaces: NamespacePatterns | None = None
    namespace_selector: LabelSelector | None = None
    object_selector: LabelSelector | None = None
    # The model label's values (catalogue products and their aliases) of the models matched.
    models: frozenset[str] | None = None
    model_label: str = "nvidia.com/gpu.product"

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
        if self.models is not None:
            named = target.models_named(self.model_label, self.models)
            if not named or not named <= self.models:
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
            and _models_overlap(self, other)
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
            and _models_within(self, other)
        )


def _models_within(inner: Scope, outer: Scope) -> bool:
    if outer.models is None:
        return True
    return (
        inner.models is not None
        and inner.models <= outer.models
        and inner.model_label == outer.model_label
    )


def _models_overlap(a: Scope, b: Scope) -> bool:
    """Scopes on the same model label that name no model in common select apart."""
    if a.models is None or b.models is None or a.model_label != b.model_label:
        return True
    return bool(a.models & b.models)


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
