"""A connection to the Kubernetes API made only once a loaded policy set needs it.

Most policy sets never need the cluster. For them the server never loads the Kubernetes
client (a third of a worker's memory), never lists or watches anything, and needs no
permission to. The connection is made as soon as a loaded set needs it: at start, after the
reload that brings such a policy, or, failing both, by the first admission that asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from webhook.policy.policy_set import PolicySet
from webhook.policy.store import ReloadResult, ReloadStatus, ServedSet

Source = TypeVar("Source")


class OnDemand(Generic[Source]):
    """A `ReloadObserver` of the store whose policies decide when `connect` is called (once,
    whatever the threads); `needed` says whether a policy set needs the connection."""

    def __init__(self, connect: Callable[[], Source], needed: Callable[[PolicySet], bool]) -> None:
        self._connect = connect
        self._needed = needed
        self._source: Source | None = None
        self._lock = threading.Lock()

    @property
    def is_connected(self) -> bool:
        return self._source is not None

    def connected(self) -> Source:
        source = self._source
        if source is None:
            with self._lock:
                if self._source is None:
                    self._source = self._connect()
                source = self._source
        return source

    def policies_observed(
        self, result: ReloadResult | None, current: ServedSet, status: ReloadStatus
    ) -> None:
        if self._needed(current.policy_set):
            self.connected()
