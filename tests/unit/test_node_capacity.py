"""What a node advertises, from label sets seen on real clusters (tests/fixtures/node-labels), and
the JSON patch that gets it there."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonpatch
import pytest
import yaml

from webhook.nodes.gpu_labels import OVERRIDE_LABEL
from webhook.nodes.node_plan import (
    Advertise,
    Leave,
    NodeView,
    Withdraw,
    needed_changes,
    plan_node,
    status_patch,
)
from webhook.policy.label_selectors import LabelSelector, ValueSet, requirement
from webhook.policy.model import GpuModel, MemoryUnit, MultiGpuNodes, NodePool, Sharing

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "node-labels"
VRAM = "example.com/vram"
POOL_LABEL = "pool"

CATALOGUE = {
    model.product: model
    for model in (
        GpuModel("Tesla-T4", 15360),
        GpuModel("NVIDIA-A10G", 23028),
        GpuModel("NVIDIA-L40S", 46068),
        # The catalogue's figure for this A100 is larger than what its node reports (39538).
        GpuModel("A100-SXM4-40GB", 40960),
    )
}


def sharing(
    unit: MemoryUnit = "MiB",
    multi_gpu: MultiGpuNodes = MultiGpuNodes.SKIP,
    resource: str = VRAM,
    pool: str = "shared",
) -> Sharing:
    selector = LabelSelector.build([(POOL_LABEL, ValueSet.of([pool]))])
    return Sharing(
        vram_resource=resource,
        models=MappingProxyType(CATALOGUE),
        unit=unit,
        nodes=NodePool(selector, multi_gpu),
    )


def fixture_node(name: str, **extra_labels: str) -> dict[str, Any]:
    node: dict[str, Any] = yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())
    node["metadata"]["labels"] = {**node["metadata"]["labels"], POOL_LABEL: "shared"}
    node["metadata"]["labels"].update(extra_labels)
    return node


def plan_of(node: Mapping[str, Any], *policies: Sharing) -> Any:
    given = [(f"policy-{index}", policy) for index, policy in enumerate(policies)]
    return plan_node(NodeView.of(node), given or [("team", sharing())])


# (fixture, unit, multiGPU, what the node advertises: an amount, or the class and a fragment)
CAPACITY = [
    ("nvidia-tesla-t4-baremetal", "MiB", "Skip", 15360),
    ("nvidia-tesla-t4-baremetal", "GiB", "Skip", 15),
    # Time-slicing multiplies schedulable units, not memory: still one card of 15360 MiB.
    ("nvidia-tesla-t4-time-slicing", "MiB", "Skip", 15360),
    ("nvidia-tesla-v100-pcie-16gb", "GiB", "Skip", 16),
    # Labels without a device plugin's capacity: the memory is still the card's.
    ("nvidia-a10g-aws-g5-2xlarge", "MiB", "Skip", 23028),
    ("nvidia-a10-vm", "MiB", "Skip", 23028),
    ("nvidia-a100-sxm4-40gb-gfd-readme", "MiB", "Skip", 39538),
    ("nvidia-l40s-vm", "MiB", "Skip", (Leave, "nvidia.com/gpu.count is missing")),
    ("nvidia-h100-80gb-hbm3-x8-xe9680", "MiB", "Skip", (Withdraw, "8 cards")),
    ("nvidia-h100-80gb-hbm3-x8-xe9680", "MiB", "Sum", 8 * 81559),
    ("nvidia-h100-80gb-hbm3-x8-xe9680", "GiB", "Sum", 8 * 79),
    ("nvidia-a100-80gb-pcie-mig-single", "MiB", "Skip", (Withdraw, "MIG is on")),
    ("nvidia-a100-80gb-pcie-mig-mixed", "MiB", "Skip", (Withdraw, "nvidia.com/mig-1g.10gb.count")),
    ("nvidia-a100-80gb-pcie-mig-invalid", "MiB", "Skip", (Withdraw, "MIG-INVALID")),
    ("nvidia-a100-sxm4-40gb-mig-mixed-7g", "MiB", "Skip", (Withdraw, "mig-7g.40gb.count=4")),
    # AMD: sizes in GiB; the key-encoded label counts the cards of that size.
    ("amd-mi300x-cpx-partitioned-beta-labels", "GiB", "Skip", 192),
    ("amd-vega8-apu-beta-only", "MiB", "Skip", 1024),
    ("amd-radeon-r9600d-x8", "MiB", "Skip", (Leave, "no card count")),
    ("amd-mi355x-dpx-nps1", "MiB", "Skip", (Leave, "no card count")),
    ("intel-alderlake-igpu-nfd", "MiB", "Skip", (Withdraw, "no GPU labels")),
]


@pytest.mark.parametrize(
    ("fixture", "unit", "multi_gpu", "expected"),
    CAPACITY,
    ids=[f"{case[0]}-{case[1]}-{case[2]}" for case in CAPACITY],
)
def test_capacity_from_real_label_sets(
    fixture: str, unit: MemoryUnit, multi_gpu: str, expected: int | tuple[type, str]
) -> None:
    plan = plan_of(fixture_node(fixture), sharing(unit, MultiGpuNodes(multi_gpu)))
    got = plan.resources[VRAM]
    if isinstance(expected, int):
        assert got == Advertise(expected, got.how), got
        return
    kind, fragment = expected
    assert isinstance(got, kind), got
    assert fragment in (got.problem if isinstance(got, Leave) else got.reason)


def amd_r9600d(capacity: str) -> dict[str, Any]:
    node = fixture_node("amd-radeon-r9600d-x8")
    node["status"] = {"capacity": {"amd.com/gpu": capacity}}
    return node


@pytest.mark.parametrize(
    ("capacity", "multi_gpu", "expected"),
    [
        ("8", MultiGpuNodes.SUM, Advertise(8 * 32 * 1024, "")),
        ("8", MultiGpuNodes.SKIP, Withdraw("8 cards")),
        ("1", MultiGpuNodes.SKIP, Advertise(32 * 1024, "")),
        # 0 while the device plugin registers: unknown, not "no cards".
        ("0", MultiGpuNodes.SKIP, Leave("no card count")),
        ("eight", MultiGpuNodes.SKIP, Leave("'eight' is not a whole number")),
    ],
)
def test_amd_cards_are_counted_by_the_device_plugin(
    capacity: str, multi_gpu: MultiGpuNodes, expected: Advertise | Withdraw | Leave
) -> None:
    got = plan_of(amd_r9600d(capacity), sharing(multi_gpu=multi_gpu)).resources[VRAM]
    assert type(got) is type(expected)
    if isinstance(expected, Advertise):
        assert isinstance(got, Advertise) and got.amount == expected.amount
    else:
        assert expected.__dict__.popitem()[1] in next(iter(got.__dict__.values()))


T4 = "nvidia-tesla-t4-baremetal"


def test_the_amd_labellers_count_wins_and_a_device_plugin_that_disagrees_is_named() -> None:
    node = fixture_node("amd-mi300x-cpx-partitioned-beta-labels")
    node["status"] = {"capacity": {"amd.com/gpu": "1"}}
    agreed = plan_of(node, sharing("GiB")).resources[VRAM]
    assert isinstance(agreed, Advertise) and agreed.amount == 192
    # The partitioned MI300X: 8 partitions scheduled, 1 card of 192G labelled.
    node["status"] = {"capacity": {"amd.com/gpu": "8"}}
    disagreed = plan_of(node, sharing("GiB", MultiGpuNodes.SUM)).resources[VRAM]
    assert isinstance(disagreed, Leave)
    assert "counts 1 cards of 192G and the device plugin 8" in disagreed.problem


MALFORMED = [
    (T4, {"nvidia.com/gpu.count": "two"}, "nvidia.com/gpu.count='two' is not a whole number"),
    (T4, {"nvidia.com/gpu.memory": "15GiB"}, "nvidia.com/gpu.memory='15GiB' is not a whole number"),
    (T4, {OVERRIDE_LABEL: "15Gi"}, f"{OVERRIDE_LABEL}='15Gi' is not a whole number of MiB"),
    ("amd-radeon-r9600d-x8", {"amd.com/gpu.vram": "32GB"}, "AMD VRAM '32GB' is not a size in G"),
    (
        "amd-mi300x-cpx-partitioned-beta-labels",
        {"beta.amd.com/gpu.vram.24G": "8"},
        "AMD cards of different sizes (192G, 24G)",
    ),
]


@pytest.mark.parametrize(
    ("fixture", "labels", "problem"), MALFORMED, ids=[case[2] for case in MALFORMED]
)
def test_a_malformed_label_leaves_the_node_as_it_is(
    fixture: str, labels: dict[str, str], problem: str
) -> None:
    node = fixture_node(fixture, **labels)
    node["status"] = {"capacity": {VRAM: "15360"}, "allocatable": {VRAM: "15360"}}
    plan = plan_of(node)
    got = plan.resources[VRAM]
    assert isinstance(got, Leave) and got.problem.startswith(f"labels unreadable: {problem}")
    assert plan.problems == (got.problem,)
    assert needed_changes(NodeView.of(node), plan) == {}


def test_a_missing_memory_label_is_read_from_the_catalogue() -> None:
    node = fixture_node("nvidia-tesla-t4-baremetal")
    del node["metadata"]["labels"]["nvidia.com/gpu.memory"]
    got = plan_of(node).resources[VRAM]
    assert isinstance(got, Advertise) and got.amount == 15360
    assert "catalogue" in got.how
    node["metadata"]["labels"]["nvidia.com/gpu.product"] = "Tesla-T4-SHARED"
    missing = plan_of(node).resources[VRAM]
    assert isinstance(missing, Leave)
    assert "nvidia.com/gpu.product=Tesla-T4-SHARED is not in the policy's models" in missing.problem


def test_the_override_label_states_the_node_whatever_its_cards() -> None:
    node = fixture_node("nvidia-h100-80gb-hbm3-x8-xe9680", **{OVERRIDE_LABEL: "81559"})
    got = plan_of(node).resources[VRAM]
    assert isinstance(got, Advertise) and got.amount == 81559
    intel = fixture_node("intel-alderlake-igpu-nfd", **{OVERRIDE_LABEL: "4096"})
    assert plan_of(intel, sharing("GiB")).resources[VRAM].amount == 4  # type: ignore[union-attr]


def test_a_catalogue_larger_than_the_card_is_warned_of() -> None:
    plan = plan_of(fixture_node("nvidia-a100-sxm4-40gb-gfd-readme"))
    (warning,) = plan.warnings
    assert "A100-SXM4-40GB reports 39538 MiB per card but the catalogue says 40960" in warning
    assert plan_of(fixture_node("nvidia-tesla-t4-baremetal")).warnings == ()


def test_summed_cards_are_warned_of() -> None:
    plan = plan_of(
        fixture_node("nvidia-h100-80gb-hbm3-x8-xe9680"), sharing(multi_gpu=MultiGpuNodes.SUM)
    )
    assert any("8 cards summed" in warning for warning in plan.warnings)


def test_nodes_outside_every_pool_lose_the_resource() -> None:
    node = fixture_node("nvidia-tesla-t4-baremetal")
    node["metadata"]["labels"][POOL_LABEL] = "whole"
    plan = plan_of(node)
    assert plan.resources[VRAM] == Withdraw("in no policy's node pool")
    no_pool = Sharing(vram_resource=VRAM, models=MappingProxyType(CATALOGUE))
    assert plan_node(NodeView.of(node), [("team", no_pool)]).resources[VRAM] == Withdraw(
        "in no policy's node pool"
    )


def test_two_pools_that_disagree_leave_the_node_and_name_both() -> None:
    node = fixture_node("nvidia-tesla-t4-baremetal")
    plan = plan_of(node, sharing("MiB"), sharing("GiB"))
    assert plan.resources[VRAM] == Leave(
        f'policies "policy-0", "policy-1" claim the node for {VRAM} with different amounts'
    )
    agreeing = plan_of(node, sharing("MiB"), sharing("MiB"))
    assert agreeing.resources[VRAM] == Advertise(15360, agreeing.resources[VRAM].how)  # type: ignore[union-attr]


def test_each_resource_is_planned_on_its_own() -> None:
    node = fixture_node("nvidia-tesla-t4-baremetal")
    plan = plan_of(node, sharing(), sharing("GiB", resource="example.com/vram-gib", pool="none"))
    assert isinstance(plan.resources[VRAM], Advertise)
    assert plan.resources["example.com/vram-gib"] == Withdraw("in no policy's node pool")


# --- the patch ---------------------------------------------------------------------------


def node_with(
    capacity: dict[str, str] | None, allocatable: dict[str, str] | None
) -> dict[str, Any]:
    node = fixture_node("nvidia-tesla-t4-baremetal")
    node["status"] = {}
    if capacity is not None:
        node["status"]["capacity"] = capacity
    if allocatable is not None:
        node["status"]["allocatable"] = allocatable
    return node


PATCHES = [
    pytest.param(
        {"cpu": "4", "nvidia.com/gpu": "1"},
        {"cpu": "3800m", "nvidia.com/gpu": "0"},
        [
            {"op": "add", "path": "/status/capacity/example.com~1vram", "value": "15360"},
            {"op": "add", "path": "/status/allocatable/example.com~1vram", "value": "15360"},
        ],
        id="added beside the others",
    ),
    pytest.param(
        {"cpu": "4", VRAM: "0"},
        {"cpu": "4", VRAM: "0"},
        [
            {"op": "add", "path": "/status/capacity/example.com~1vram", "value": "15360"},
            {"op": "add", "path": "/status/allocatable/example.com~1vram", "value": "15360"},
        ],
        id="zeroed by a kubelet that re-registered",
    ),
    pytest.param(
        {"cpu": "4", VRAM: "15360"},
        {"cpu": "4"},
        [{"op": "add", "path": "/status/allocatable/example.com~1vram", "value": "15360"}],
        id="allocatable only",
    ),
    pytest.param({"cpu": "4", VRAM: "15360"}, {VRAM: "15Ki"}, [], id="equal quantities"),
    pytest.param(
        None,
        {"cpu": "4"},
        [
            {"op": "add", "path": "/status/capacity", "value": {VRAM: "15360"}},
            {"op": "add", "path": "/status/allocatable/example.com~1vram", "value": "15360"},
        ],
        id="no capacity map",
    ),
]


@pytest.mark.parametrize(("capacity", "allocatable", "expected"), PATCHES)
def test_the_patch_sets_only_what_differs_and_nothing_else(
    capacity: dict[str, str] | None,
    allocatable: dict[str, str] | None,
    expected: list[dict[str, Any]],
) -> None:
    node = node_with(capacity, allocatable)
    view = NodeView.of(node)
    plan = plan_of(node)
    operations = status_patch(view, needed_changes(view, plan))
    assert operations == expected
    patched = jsonpatch.apply_patch(node, operations)
    for key in ("capacity", "allocatable"):
        assert patched["status"][key][VRAM] in ("15360", "15Ki")
        others = {k: v for k, v in patched["status"][key].items() if k != VRAM}
        before = {k: v for k, v in (node["status"].get(key) or {}).items() if k != VRAM}
        assert others == before
    again = NodeView.of(patched)
    assert needed_changes(again, plan_of(patched)) == {}


def test_a_node_that_left_the_pool_loses_only_the_vram_resource() -> None:
    node = node_with({"cpu": "4", VRAM: "15360"}, {"cpu": "4", VRAM: "15360", "x.io/y": "1"})
    node["metadata"]["labels"][POOL_LABEL] = "whole"
    view = NodeView.of(node)
    operations = status_patch(view, needed_changes(view, plan_of(node)))
    assert operations == [
        {"op": "remove", "path": "/status/capacity/example.com~1vram"},
        {"op": "remove", "path": "/status/allocatable/example.com~1vram"},
    ]
    patched = jsonpatch.apply_patch(node, operations)
    assert patched["status"] == {
        "capacity": {"cpu": "4"},
        "allocatable": {"cpu": "4", "x.io/y": "1"},
    }
    assert needed_changes(NodeView.of(patched), plan_of(patched)) == {}


def test_a_selector_with_expressions_picks_the_pool() -> None:
    selector = LabelSelector.build([("nvidia.com/gpu.product", requirement("In", ["Tesla-T4"]))])
    pool = Sharing(vram_resource=VRAM, models=MappingProxyType(CATALOGUE), nodes=NodePool(selector))
    t4 = fixture_node("nvidia-tesla-t4-baremetal")
    a10 = fixture_node("nvidia-a10-vm")
    assert isinstance(plan_node(NodeView.of(t4), [("t4", pool)]).resources[VRAM], Advertise)
    assert isinstance(plan_node(NodeView.of(a10), [("t4", pool)]).resources[VRAM], Withdraw)


def test_a_patch_planned_on_an_older_node_is_refused() -> None:
    node = node_with({"cpu": "4"}, {"cpu": "4"})
    node["metadata"]["resourceVersion"] = "41"
    view = NodeView.of(node)
    operations = status_patch(view, needed_changes(view, plan_of(node)))
    assert operations[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "41"}
    assert jsonpatch.apply_patch(node, operations)["status"]["capacity"][VRAM] == "15360"
    node["metadata"]["resourceVersion"] = "42"  # a kubelet wrote the node meanwhile
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(node, operations)


def test_a_resource_no_policy_names_any_more_is_withdrawn() -> None:
    node = node_with({"cpu": "4", "example.com/old-vram": "15"}, {"example.com/old-vram": "15"})
    view = NodeView.of(node)
    plan = plan_node(view, [("team", sharing())], retired=["example.com/old-vram"])
    assert plan.resources["example.com/old-vram"] == Withdraw("no policy names it any more")
    operations = status_patch(view, needed_changes(view, plan))
    patched = jsonpatch.apply_patch(node, operations)
    assert patched["status"]["capacity"] == {"cpu": "4", VRAM: "15360"}
    assert patched["status"]["allocatable"] == {VRAM: "15360"}
