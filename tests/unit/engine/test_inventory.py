"""inventory.py: what the nodes say about their GPUs, as a snapshot the engine reads."""

from __future__ import annotations

import pytest

from webhook.engine.inventory import NO_INVENTORY, MigInventory

SNAPSHOT = MigInventory(
    by_product={
        "NVIDIA-A100-SXM4-40GB": {"nvidia.com/mig-1g.5gb": 4864, "nvidia.com/mig-3g.20gb": None}
    },
    version=3,
    memory_by_product={"NVIDIA-A100-SXM4-40GB": 40960, "Custom-GPU": 24000},
)


@pytest.mark.parametrize(
    ("inventory", "product", "advertised"),
    [
        (
            SNAPSHOT,
            "NVIDIA-A100-SXM4-40GB",
            {"nvidia.com/mig-1g.5gb": 4864, "nvidia.com/mig-3g.20gb": None},
        ),
        (SNAPSHOT, "Tesla-T4", None),
        (SNAPSHOT, "Custom-GPU", None),
        (NO_INVENTORY, "NVIDIA-A100-SXM4-40GB", None),
        (MigInventory(by_product={"Tesla-T4": {}}), "Tesla-T4", {}),
    ],
    ids=[
        "the profiles a product's nodes advertise, memory where labelled",
        "none seen for another product",
        "memory alone says nothing of MIG",
        "nothing when the nodes were not read",
        "nodes seen advertising no profile say so, not nothing",
    ],
)
def test_mig_inventory_advertised_by_product(
    inventory: MigInventory, product: str, advertised: object
) -> None:
    assert inventory.advertised(product) == advertised


@pytest.mark.parametrize(
    ("inventory", "product", "memory"),
    [
        (SNAPSHOT, "Custom-GPU", 24000),
        (SNAPSHOT, "NVIDIA-A100-SXM4-40GB", 40960),
        (SNAPSHOT, "Tesla-T4", None),
        (NO_INVENTORY, "Custom-GPU", None),
    ],
    ids=[
        "a model the catalogue lacks, as its nodes label it",
        "a known model too",
        "none seen",
        "nothing when the nodes were not read",
    ],
)
def test_mig_inventory_memory_of_a_product(
    inventory: MigInventory, product: str, memory: int | None
) -> None:
    assert inventory.memory_of(product) == memory


def test_no_inventory_is_version_zero_and_empty() -> None:
    assert NO_INVENTORY.version == 0
    assert dict(NO_INVENTORY.by_product) == {} and dict(NO_INVENTORY.memory_by_product) == {}
    assert MigInventory() == NO_INVENTORY
