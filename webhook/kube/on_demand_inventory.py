"""The nodes' MIG profiles, read only once a policy's backend is MIG (see on_demand.py)."""

from __future__ import annotations

from collections.abc import Callable

from webhook.engine.inventory import InventorySource, MigInventory
from webhook.kube.label_modes import check_mode
from webhook.kube.on_demand import OnDemand

Connect = Callable[[str], InventorySource]


def _connect(mode: str) -> InventorySource:
    # Imported here: importing it loads the Kubernetes client.
    from webhook.kube.node_inventory import node_inventory_source

    return node_inventory_source(mode)


class OnDemandNodeInventory(OnDemand[InventorySource]):
    """An `InventorySource`, and a `ReloadObserver` of the store. Raises ValueError at once
    for a mode that is not one of `MODES`."""

    def __init__(self, mode: str, connect: Connect = _connect) -> None:
        check_mode(mode, "node inventory")
        self.mode = mode
        super().__init__(lambda: connect(mode), lambda policies: policies.reads_nodes)

    def mig_inventory(self) -> MigInventory:
        return self.connected().mig_inventory()
