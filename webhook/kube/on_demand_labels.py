"""Namespace labels from the Kubernetes API, connected to only once a policy needs them.

Most policy sets never select namespaces by label. For them the server never loads the
Kubernetes client (a third of a worker's memory), never lists or watches namespaces, and
needs no permission to read them. The connection is made as soon as a loaded set needs
labels: at start, after the reload that brings such a policy, or, failing both, by the first
admission that asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from webhook.kube.label_modes import check_mode
from webhook.policy.namespace_labels import LabelLookup, NamespaceLabelSource
from webhook.policy.store import ReloadResult, ReloadStatus, ServedSet

Connect = Callable[[str], NamespaceLabelSource]


def _connect(mode: str) -> NamespaceLabelSource:
    # Imported here: importing it loads the Kubernetes client.
    from webhook.kube.client_config import namespace_label_source

    return namespace_label_source(mode)


class OnDemandLabelSource:
    """A `NamespaceLabelSource`, and a `ReloadObserver` of the store whose policies decide
    when it connects. Raises ValueError at once for a mode that is not one of `MODES`."""

    def __init__(self, mode: str, connect: Connect = _connect) -> None:
        check_mode(mode)
        self.mode = mode
        self._connect = connect
        self._source: NamespaceLabelSource | None = None
        self._lock = threading.Lock()

    @property
    def is_connected(self) -> bool:
        return self._source is not None

    def connected(self) -> NamespaceLabelSource:
        """The source, connected on the first call (once, whatever the threads)."""
        source = self._source
        if source is None:
            with self._lock:
                if self._source is None:
                    self._source = self._connect(self.mode)
                source = self._source
        return source

    def labels_of(self, namespace: str) -> LabelLookup:
        return self.connected().labels_of(namespace)

    def policies_observed(
        self, result: ReloadResult | None, current: ServedSet, status: ReloadStatus
    ) -> None:
        if current.policy_set.needs_namespace_labels:
            self.connected()
