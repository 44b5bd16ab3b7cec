"""What the cluster's nodes say about their GPUs, as far as the engine asks: the MIG profiles
the nodes of each GPU model advertise, and each model's memory as the nodes label it (which
sizes a share of a model the catalogue lacks).

The engine stays pure: the server hands it a snapshot (`MigInventory`) made from a watch of
the nodes, and the offline tools hand it none, so that it sizes from the catalogue alone.
A snapshot's `version` changes whenever what it says changes, so outcomes kept for one
snapshot are never served for another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

# A MIG device resource (`nvidia.com/mig-1g.10gb`) and the memory of its instances in MiB,
# as the node's `<resource>.memory` label gives it (None where it gives none).
Advertised = Mapping[str, int | None]


@dataclass(frozen=True)
class MigInventory:
    """The MIG device resources that the nodes of each product advertise in their
    allocatable, with their memory where the nodes say it (the least, where nodes differ).
    `version` 0: the nodes were not read."""

    by_product: Mapping[str, Advertised] = field(default_factory=lambda: MappingProxyType({}))
    version: int = 0
    # GPU feature discovery's `nvidia.com/gpu.memory` of each product, in MiB (the least,
    # where nodes differ).
    memory_by_product: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def advertised(self, product: str) -> Advertised | None:
        """The MIG resources the nodes of `product` advertise; None when none was seen, and
        the catalogue alone decides."""
        return self.by_product.get(product)

    def memory_of(self, product: str) -> int | None:
        """The memory the nodes of `product` label it with; None when none was seen."""
        return self.memory_by_product.get(product)


NO_INVENTORY = MigInventory()


class InventorySource(Protocol):
    def mig_inventory(self) -> MigInventory:
        """The latest snapshot; never waits on the network."""
