"""Where the labels of a namespace come from when a policy selects namespaces by label.

An AdmissionReview names the namespace but carries none of its labels, so they are looked up:
from the Kubernetes API in a cluster (webhook/kube/namespace_cache.py), from the command line in
the offline tools, or not at all on a laptop. A lookup that cannot answer says why, and the
policy selection then matches that namespace on its name alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol


@dataclass(frozen=True)
class LabelLookup:
    """The labels of one namespace, or `labels=None` with `unknown_because` saying why."""

    labels: Mapping[str, str] | None
    unknown_because: str = ""

    @classmethod
    def known(cls, labels: Mapping[str, str]) -> LabelLookup:
        return cls(MappingProxyType(dict(labels)))

    @classmethod
    def unknown(cls, because: str) -> LabelLookup:
        return cls(None, because)


class NamespaceLabelSource(Protocol):
    def labels_of(self, namespace: str) -> LabelLookup:
        """The labels of `namespace`. Must not block on the network in the common case."""
        ...


NO_CLUSTER_REASON = "no Kubernetes API is configured"


@dataclass(frozen=True)
class NoCluster:
    """No Kubernetes API to ask: every namespace's labels are unknown."""

    reason: str = NO_CLUSTER_REASON

    def labels_of(self, namespace: str) -> LabelLookup:
        return LabelLookup.unknown(self.reason)


@dataclass(frozen=True)
class StaticNamespaceLabels:
    """Labels given up front (offline tools, tests); namespaces not listed have the labels of
    `others`, which is None (unknown) unless set."""

    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    others: Mapping[str, str] | None = None
    reason: str = "no labels were given for this namespace"

    def labels_of(self, namespace: str) -> LabelLookup:
        if namespace in self.labels:
            return LabelLookup.known(self.labels[namespace])
        if self.others is not None:
            return LabelLookup.known(self.others)
        return LabelLookup.unknown(self.reason)
