"""Namespace labels from the Kubernetes API, connected to only once a policy selects
namespaces by label (see on_demand.py)."""

from __future__ import annotations

from collections.abc import Callable

from webhook.kube.label_modes import check_mode
from webhook.kube.on_demand import OnDemand
from webhook.policy.namespace_labels import LabelLookup, NamespaceLabelSource

Connect = Callable[[str], NamespaceLabelSource]


def _connect(mode: str) -> NamespaceLabelSource:
    # Imported here: importing it loads the Kubernetes client.
    from webhook.kube.client_config import namespace_label_source

    return namespace_label_source(mode)


class OnDemandLabelSource(OnDemand[NamespaceLabelSource]):
    """A `NamespaceLabelSource`, and a `ReloadObserver` of the store whose policies decide
    when it connects. Raises ValueError at once for a mode that is not one of `MODES`."""

    def __init__(self, mode: str, connect: Connect = _connect) -> None:
        check_mode(mode)
        self.mode = mode
        super().__init__(lambda: connect(mode), lambda policies: policies.needs_namespace_labels)

    def labels_of(self, namespace: str) -> LabelLookup:
        return self.connected().labels_of(namespace)
