"""The MIG profiles the cluster's nodes advertise, kept by a LIST and WATCH of the nodes.

For each node only its GPU product (GPU feature discovery's `nvidia.com/gpu.product`, which
keeps the card's name under the mixed strategy), the `nvidia.com/mig-<profile>` resources its
allocatable holds, and the memory GFD's `nvidia.com/mig-<profile>.memory` labels give them are
kept; the engine reads a snapshot of their union by product, which
changes (and gets a new version) only when that union does. What the informer lists comes
from the apiserver, yet it is bounded all the same: at most `max_nodes` nodes are kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType

from kubernetes.client import ApiClient, CoreV1Api

from webhook.engine.inventory import NO_INVENTORY, Advertised, InventorySource, MigInventory
from webhook.kube.informer import Backoff, Informer, InformerBacked, KubeObject
from webhook.policy.model import MIG_RESOURCE_PREFIX
from webhook.quantity import plain_int, quantity_or_none

log = logging.getLogger("webhook")

PRODUCT_LABEL = "nvidia.com/gpu.product"
MAX_NODES = 100_000

MEMORY_LABEL = "nvidia.com/gpu.memory"
# A node's product, its MIG resources with their memory, and its card's memory in MiB.
NodeGpus = tuple[str, Advertised, int | None]


def node_gpus(node: KubeObject) -> NodeGpus | None:
    """A node's product, the MIG resources it has at least one of (with the memory its
    `<resource>.memory` label gives), and the memory its `nvidia.com/gpu.memory` label gives;
    None for a node with neither."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping):
        return None
    product = labels.get(PRODUCT_LABEL)
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    if not isinstance(product, str) or not isinstance(allocatable, Mapping):
        return None
    offered = {
        name: _mib(labels.get(f"{name}.memory"))
        for name, amount in allocatable.items()
        if isinstance(name, str) and name.startswith(MIG_RESOURCE_PREFIX) and _positive(amount)
    }
    memory = _mib(labels.get(MEMORY_LABEL))
    if not offered and memory is None:
        return None
    return product, MappingProxyType(offered), memory


# What the inventory holds of a node: its name, and its GPUs if it has MIG devices or memory.
KeptGpus = tuple[str, NodeGpus | None]
# Distinct `NodeGpus` shared between nodes; past this many, sharing starts again.
MAX_SHARED = 10_000


def _positive(amount: object) -> bool:
    found = quantity_or_none(amount)
    return found is not None and found > 0


def _mib(label: object) -> int | None:
    return plain_int(label) or None


def _union(held: Advertised, more: Advertised) -> Advertised:
    """Both nodes' resources; where both give a memory, the lesser holds on either."""
    merged = dict(held)
    for name, memory in more.items():
        known = merged.get(name)
        sizes = [size for size in (known, memory) if size is not None]
        merged[name] = min(sizes) if sizes else None
    return MappingProxyType(merged)


class NodeInventory(InformerBacked):
    """An `InventorySource` backed by an informer on the nodes of one cluster (see
    `InformerBacked`)."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        max_nodes: int = MAX_NODES,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
    ) -> None:
        self._api_client = api_client
        self._max_nodes = max_nodes
        self._nodes: dict[str, NodeGpus] = {}
        self._lock = threading.Lock()
        self._snapshot = NO_INVENTORY
        self._warned_full = False
        # Nodes of one kind have equal GPUs: one tuple serves them all.
        self._shared: dict[tuple[object, ...], NodeGpus] = {}
        self._informer = Informer(
            CoreV1Api(api_client).list_node,
            self,
            keep=self.keep,
            what="node MIG profiles",
            watch_timeout=watch_timeout,
            backoff=backoff,
        )

    def mig_inventory(self) -> MigInventory:
        return self._snapshot

    def keep(self, node: KubeObject) -> KeptGpus | None:
        """The name and `node_gpus` of a node; a node without GPUs keeps its name, so that a
        watch event that takes its GPUs away is seen."""
        name = (node.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            return None
        found = node_gpus(node)
        if found is None:
            return name, None
        product, offered, memory = found
        key = (product, tuple(sorted(offered.items())), memory)
        if len(self._shared) >= MAX_SHARED:
            self._shared.clear()
        return name, self._shared.setdefault(key, found)

    def listed(self, objects: list[KeptGpus]) -> None:
        fresh: dict[str, NodeGpus] = {}
        for name, found in objects:
            if found is not None and self._room(len(fresh)):
                fresh[name] = found
        with self._lock:
            self._nodes = fresh
            self._publish()

    def changed(self, event_type: str, obj: KeptGpus) -> None:
        name, found = obj
        if event_type == "DELETED":
            found = None
        with self._lock:
            if self._nodes.get(name) == found:
                return  # most node events (heartbeats, conditions) change nothing here
            if found is None:
                self._nodes.pop(name, None)
            elif name in self._nodes or self._room(len(self._nodes)):
                self._nodes[name] = found
            self._publish()

    def _room(self, held: int) -> bool:
        if held < self._max_nodes:
            return True
        if not self._warned_full:
            self._warned_full = True
            log.warning(
                "node MIG profiles: more than %d nodes with MIG devices; the rest are not read",
                self._max_nodes,
            )
        return False

    def _publish(self) -> None:
        """Called with the lock held: a new snapshot when the union by product changed."""
        by_product: dict[str, Advertised] = {}
        memory: dict[str, int] = {}
        for product, offered, mib in self._nodes.values():
            if offered:
                by_product[product] = _union(by_product.get(product, {}), offered)
            if mib is not None:
                memory[product] = min(mib, memory.get(product, mib))
        current = self._snapshot
        if by_product != current.by_product or memory != current.memory_by_product:
            self._snapshot = MigInventory(
                MappingProxyType(by_product), current.version + 1, MappingProxyType(memory)
            )


class NoNodes:
    """The source where the nodes are not read: every snapshot says nothing."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def mig_inventory(self) -> MigInventory:
        return NO_INVENTORY


def node_inventory_source(mode: str) -> InventorySource:
    """A started `NodeInventory` on the API `mode` selects, or `NoNodes` saying why there is
    none; a policy's MIG shares are then chosen from the catalogue alone."""
    # Imported here: the client configuration module loads what namespace labels need too.
    from webhook.kube.client_config import NOT_CONFIGURED, api_client
    from webhook.policy.namespace_labels import NoCluster

    if mode == "off":
        return NoNodes("reading nodes is off (NODE_INVENTORY=off)")
    client = api_client(mode)
    if isinstance(client, NoCluster):
        # Quiet where no cluster is configured at all (make run on a laptop), as namespace
        # labels are; a configuration that does not load is worth a warning.
        if client.reason != NOT_CONFIGURED:
            log.warning("MIG profiles come from the catalogue: %s", client.reason)
        return NoNodes(client.reason)
    inventory = NodeInventory(client)
    inventory.start()
    return inventory
