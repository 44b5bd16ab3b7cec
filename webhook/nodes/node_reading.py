"""What the advertiser keeps of each node: the few labels and status resources its plan reads.

A Node object is 10 to 30 KiB (images, conditions, managed fields, every label the feature
labellers write); the advertiser holds every node of the cluster, up to 100,000 of them. It
keeps a `NodeView` of the name, the resourceVersion, the labels `read_gpus` and the policies'
node selectors and model labels read, and the VRAM resources in `status`. Nodes of one kind
carry the same such labels and amounts, so each distinct map is held once and shared.

What is kept depends on the policies: a policy that reads another label, or names another
VRAM resource, makes a new `NodeReading`, and the nodes are listed again under it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from webhook.nodes.gpu_labels import READ_RESOURCES, reads_label
from webhook.nodes.node_plan import STATUS_MAPS, NodeView
from webhook.policy.model import Sharing

# Distinct maps shared between nodes; past this many, sharing starts again from nothing (what
# is held stays right, only less of it is shared).
MAX_SHARED_MAPS = 200_000
# Label keys judged once each; clusters carry a few hundred distinct keys, not more.
MAX_JUDGED_KEYS = 20_000

EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class NodeReading:
    """The labels and the status resources that plans under one set of policies read."""

    label_keys: frozenset[str]
    resources: frozenset[str]

    @classmethod
    def of(cls, policies: Sequence[tuple[str, Sharing]], resources: Iterable[str]) -> NodeReading:
        """For the `(name, sharing)` pairs of `sharing_policies`, and the VRAM `resources` the
        plans may advertise or withdraw."""
        keys: set[str] = set()
        for _, sharing in policies:
            keys.add(sharing.model_label)
            selector = sharing.nodes.selector
            if selector is not None:
                keys.update(selector.keys)
        return cls(frozenset(keys), frozenset(resources) | READ_RESOURCES)

    def reads(self, key: str) -> bool:
        return key in self.label_keys or reads_label(key)


class NodeKeeper:
    """Makes the `NodeView` a `NodeReading` keeps of each Node object, sharing equal maps."""

    def __init__(self, reading: NodeReading) -> None:
        self.reading = reading
        self._judged: dict[str, bool] = {}
        self._shared: dict[tuple[tuple[str, Any], ...], Mapping[str, Any]] = {}

    def view(self, node: Mapping[str, Any]) -> NodeView:
        """What is kept of `node`; raises MalformedNode as `NodeView.of` does."""
        full = NodeView.of(node)
        labels = self._share({k: v for k, v in full.labels.items() if self._reads(k)})
        maps = [full.status_map(key) for key in STATUS_MAPS]
        capacity, allocatable = (
            None
            if found is None
            else self._share({k: v for k, v in found.items() if k in self.reading.resources})
            for found in maps
        )
        return NodeView(full.name, labels, capacity, allocatable, full.resource_version)

    def _reads(self, key: str) -> bool:
        judged = self._judged.get(key)
        if judged is None:
            judged = self.reading.reads(key)
            if len(self._judged) < MAX_JUDGED_KEYS:
                self._judged[key] = judged
        return judged

    def _share(self, found: dict[str, Any]) -> Mapping[str, Any]:
        if not found:
            return EMPTY
        key = tuple(sorted(found.items(), key=lambda item: item[0]))
        try:
            return self._shared[key]
        except KeyError:
            pass
        except TypeError:  # a value that is not hashable: a malformed node, held as it is
            return MappingProxyType(found)
        if len(self._shared) >= MAX_SHARED_MAPS:
            self._shared.clear()
        shared = MappingProxyType(found)
        self._shared[key] = shared
        return shared
