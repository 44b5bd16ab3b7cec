"""What the advertiser keeps of each node: only the labels and status resources its plans read,
so that a plan made from what is kept is the plan made from the whole node, on every node label
set seen on real clusters (tests/fixtures/node-labels), and equal maps held once."""

from __future__ import annotations

import copy
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import pytest
import yaml

from webhook.nodes.gpu_labels import (
    GFD_COUNT,
    GFD_MEMORY,
    GFD_PRODUCT,
    OVERRIDE_LABEL,
    READ_LABELS,
    read_gpus,
)
from webhook.nodes.node_plan import (
    Advertise,
    Leave,
    MalformedNode,
    NodePlan,
    NodeView,
    Withdraw,
    needed_changes,
    plan_node,
    sharing_policies,
    status_patch,
)
from webhook.nodes.node_reading import NodeKeeper, NodeReading
from webhook.policy.label_selectors import ABSENT, LabelSelector, ValueSet, requirement
from webhook.policy.model import GpuModel, MultiGpuNodes, NodePool, Sharing
from webhook.policy.policy_set import PolicySet

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "node-labels"
FIXTURE_NAMES = sorted(path.stem for path in FIXTURES.glob("*.yaml"))

VRAM = "example.com/vram"
VRAM_GIB = "example.com/vram-gib"
RETIRED = "example.com/old-vram"
MODEL_LABEL = "gpu.example.com/model"
SharingPolicies = list[tuple[str, Sharing]]


def loaded(directory: str) -> SharingPolicies:
    return sharing_policies(PolicySet.load(REPO_ROOT / directory).policies)


def built() -> SharingPolicies:
    """Two pools beside the shipped ones: a model label of their own, selectors with
    matchExpressions, cards summed, and a second VRAM resource in GiB."""
    catalogue = MappingProxyType(
        {
            model.product: model
            for model in (
                GpuModel("Tesla-T4", 15360),
                GpuModel("NVIDIA-A10", 23028, reserved_mib=512),
                GpuModel("NVIDIA-H100-80GB-HBM3", 81559),
                GpuModel("A100-SXM4-40GB", 40960),
            )
        }
    )
    mib = LabelSelector.build(
        [
            ("pool.example.com/shared", ValueSet.of(["yes"])),
            ("node.kubernetes.io/instance-type", requirement("NotIn", ["tiny"])),
        ]
    )
    gib = LabelSelector.build([("pool.example.com/gib", requirement("Exists"))])
    return [
        (
            "summed-mib",
            Sharing(
                VRAM,
                catalogue,
                model_label=MODEL_LABEL,
                nodes=NodePool(mib, MultiGpuNodes.SUM),
            ),
        ),
        ("gib", Sharing(VRAM_GIB, catalogue, unit="GiB", nodes=NodePool(gib))),
    ]


POLICY_SETS: dict[str, SharingPolicies] = {
    "shipped policies": loaded("policies"),
    "strict scenario's policies": loaded("tests/scenarios/strict/policies"),
    "built pools": built(),
}


def pool_labels(policies: SharingPolicies) -> dict[str, str]:
    """Labels that put a node in the pool of every policy of `policies`."""
    labels: dict[str, str] = {}
    for _, sharing in policies:
        assert sharing.nodes.selector is not None
        for key, allowed in sharing.nodes.selector.keys.items():
            values = sorted(str(value) for value in allowed.members if value is not ABSENT)
            value = values[0] if allowed.finite else "yes"
            assert value in allowed
            labels[key] = value
    return labels


def resources_of(policies: SharingPolicies) -> set[str]:
    """The VRAM resources the advertiser owns under `policies`: those named, and one retired."""
    return {sharing.vram_resource for _, sharing in policies} | {RETIRED}


def fixture(name: str) -> dict[str, Any]:
    node: dict[str, Any] = yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())
    return node


def as_found(node: dict[str, Any]) -> dict[str, Any]:
    return node


def advertising(node: dict[str, Any]) -> dict[str, Any]:
    """The node with VRAM already in its status (one amount stale, one retired), beside the
    resources every kubelet reports."""
    status = node.setdefault("status", {})
    for key in ("capacity", "allocatable"):
        status[key] = {
            **(status.get(key) or {}),
            "cpu": "64",
            "memory": "503Gi",
            "pods": "110",
            "ephemeral-storage": "1Ti",
            VRAM: "1",
            VRAM_GIB: "15",
            RETIRED: "3",
            "amd.com/gpu": "8",
        }
    return node


def stated(node: dict[str, Any]) -> dict[str, Any]:
    node["metadata"]["labels"][OVERRIDE_LABEL] = "20480"
    return node


def by_model(node: dict[str, Any]) -> dict[str, Any]:
    """Without GFD's memory label: the plan reads the model label and the catalogue."""
    labels = node["metadata"]["labels"]
    memory = labels.pop(GFD_MEMORY, None)
    if memory is not None:
        labels[MODEL_LABEL] = labels.get(GFD_PRODUCT, "Tesla-T4")
        labels.setdefault(GFD_COUNT, "2")
    return node


VARIANTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "as found": as_found,
    "advertising": advertising,
    "stated": stated,
    "by model": by_model,
}


def node_for(name: str, variant: str, policies: SharingPolicies) -> dict[str, Any]:
    node = VARIANTS[variant](fixture(name))
    node["metadata"]["labels"] = {
        **node["metadata"]["labels"],
        **pool_labels(policies),
        "kubernetes.io/hostname": node["metadata"]["name"],
    }
    node["metadata"]["resourceVersion"] = "4711"
    return node


CASES = [
    pytest.param(name, variant, policy_set, id=f"{name} {variant} under {policy_set}")
    for name in FIXTURE_NAMES
    for variant in VARIANTS
    for policy_set in POLICY_SETS
]


def keeper_for(policies: SharingPolicies) -> NodeKeeper:
    return NodeKeeper(NodeReading.of(policies, resources_of(policies)))


def plan_of(view: NodeView, policies: SharingPolicies) -> NodePlan:
    return plan_node(view, policies, retired=[RETIRED])


def test_there_are_node_fixtures_to_read() -> None:
    assert len(FIXTURE_NAMES) >= 15


@pytest.mark.parametrize(("name", "variant", "policy_set"), CASES)
def test_the_plan_from_what_is_kept_is_the_plan_from_the_whole_node(
    name: str, variant: str, policy_set: str
) -> None:
    policies = POLICY_SETS[policy_set]
    node = node_for(name, variant, policies)
    kept, whole = keeper_for(policies).view(node), NodeView.of(node)
    plan = plan_of(whole, policies)
    assert plan_of(kept, policies) == plan
    assert needed_changes(kept, plan) == needed_changes(whole, plan)
    assert status_patch(kept, needed_changes(kept, plan)) == status_patch(
        whole, needed_changes(whole, plan)
    )
    # Every policy's pool holds the node: the plans compared are more than "not in the pool".
    assert Withdraw("in no policy's node pool") not in plan.resources.values()


def test_the_fixtures_reach_every_kind_of_plan() -> None:
    """So that the comparison above covers advertising, withdrawing and leaving alike."""
    found: set[type] = set()
    for name in FIXTURE_NAMES:
        for variant in VARIANTS:
            for policies in POLICY_SETS.values():
                node = node_for(name, variant, policies)
                plan = plan_of(keeper_for(policies).view(node), policies)
                found |= {type(resource_plan) for resource_plan in plan.resources.values()}
                if plan.warnings:
                    found.add(str)
    assert found == {Advertise, Withdraw, Leave, str}


class SpyLabels(Mapping[str, str]):
    """Labels that record each key looked up by name; going through them all is recorded
    apart, as it names no key (what is then read of them is checked by comparing answers)."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        self._labels = dict(labels)
        self.looked_up: set[str] = set()
        self.gone_through = False

    def __getitem__(self, key: str) -> str:
        self.looked_up.add(key)
        return self._labels[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.looked_up.add(key)
        return self._labels.get(key, default)

    def __contains__(self, key: object) -> bool:
        self.looked_up.add(str(key))
        return key in self._labels

    def __iter__(self) -> Iterator[str]:
        self.gone_through = True
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)

    def items(self) -> ItemsView[str, str]:
        self.gone_through = True
        return self._labels.items()

    def keys(self) -> KeysView[str]:
        self.gone_through = True
        return self._labels.keys()

    def values(self) -> ValuesView[str]:
        self.gone_through = True
        return self._labels.values()


Reader = Callable[[Mapping[str, str], Mapping[str, object], Sharing], object]


def unread_lookups(
    reader: Reader, node: Mapping[str, Any], policies: SharingPolicies
) -> tuple[set[str], set[str]]:
    """The label keys and the status resources `reader` looks up under each policy of
    `policies` that a node keeper for that policy alone would not keep: `read_gpus` may read
    READ_LABELS and the policy's own model label, not another policy's."""
    whole = NodeView.of(node)
    labels, resources = set(), set()
    for name, sharing in policies:
        reading = NodeReading.of([(name, sharing)], resources_of(policies))
        spy = SpyLabels(whole.labels)
        capacity = SpyLabels(cast(Mapping[str, str], whole.capacity or {}))
        reader(spy, capacity, sharing)
        labels |= {key for key in spy.looked_up if not reading.reads(key)}
        resources |= capacity.looked_up - reading.resources
    return labels, resources


@pytest.mark.parametrize(("name", "variant", "policy_set"), CASES)
def test_every_label_read_gpus_looks_up_is_one_the_node_reading_reads(
    name: str, variant: str, policy_set: str
) -> None:
    policies = POLICY_SETS[policy_set]
    node = node_for(name, variant, policies)
    assert unread_lookups(read_gpus, node, policies) == (set(), set())


def test_the_spy_finds_a_reader_of_a_label_that_is_not_read() -> None:
    def reads_the_family(
        labels: Mapping[str, str], capacity: Mapping[str, object], sharing: Sharing
    ) -> object:
        capacity.get("nvidia.com/gpu")
        return labels.get("nvidia.com/gpu.family"), read_gpus(labels, capacity, sharing)

    policies = POLICY_SETS["shipped policies"]
    node = node_for("nvidia-a10-vm", "as found", policies)
    assert unread_lookups(reads_the_family, node, policies) == (
        {"nvidia.com/gpu.family"},
        {"nvidia.com/gpu"},
    )


@pytest.mark.parametrize(("name", "variant", "policy_set"), CASES)
def test_read_gpus_answers_the_same_from_what_is_kept(
    name: str, variant: str, policy_set: str
) -> None:
    """What `read_gpus` finds by going through every label (MIG profiles, AMD sizes in the
    key) is kept too."""
    policies = POLICY_SETS[policy_set]
    node = node_for(name, variant, policies)
    kept, whole = keeper_for(policies).view(node), NodeView.of(node)
    for _, sharing in policies:
        assert read_gpus(kept.labels, kept.capacity or {}, sharing) == read_gpus(
            whole.labels, whole.capacity or {}, sharing
        )


ALL_POLICIES = [*POLICY_SETS["shipped policies"], *POLICY_SETS["built pools"]]


def gpu_node(
    name: str = "gpu-1",
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": "77",
            "labels": {GFD_COUNT: "1", GFD_MEMORY: "15360", **(labels or {})},
        },
        "status": {"capacity": dict(capacity or {}), "allocatable": dict(capacity or {})},
    }


@pytest.mark.parametrize(
    "key",
    [
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "topology.kubernetes.io/zone",
        "feature.node.kubernetes.io/cpu-model.vendor_id",
        "feature.node.kubernetes.io/pci-10de.present",
        "nvidia.com/gpu.family",
        "nvidia.com/gpu.replicas",
        "nvidia.com/mig.strategy",
        "nvidia.com/mig-1g.10gb.memory",
        "amd.com/gpu.cu-count",
        "beta.amd.com/gpu.family.AI",
        f"{OVERRIDE_LABEL}-note",
        "nvidia.com/gpu.count.extra",
    ],
)
def test_unrelated_labels_are_not_kept(key: str) -> None:
    view = keeper_for(ALL_POLICIES).view(gpu_node(labels={key: "x"}))
    assert key not in view.labels
    assert dict(view.labels) == {GFD_COUNT: "1", GFD_MEMORY: "15360"}


@pytest.mark.parametrize(
    "key",
    [
        *sorted(READ_LABELS),
        "nvidia.com/mig-1g.10gb.count",
        "nvidia.com/mig-3g.40gb.count",
        "amd.com/gpu.vram.24G",
        "beta.amd.com/gpu.vram.192G",
        "nvidia.com/gpu.product",
        MODEL_LABEL,
        "gpu-admission.example.com/memory-sharing",
        "pool.example.com/shared",
        "node.kubernetes.io/instance-type",
        "pool.example.com/gib",
    ],
)
def test_the_labels_read_gpus_and_the_policies_read_are_kept(key: str) -> None:
    view = keeper_for(ALL_POLICIES).view(gpu_node(labels={key: "kept"}))
    assert view.labels[key] == "kept"


def test_a_label_only_another_policy_reads_is_not_kept() -> None:
    view = keeper_for(POLICY_SETS["shipped policies"]).view(
        gpu_node(labels={MODEL_LABEL: "Tesla-T4", "pool.example.com/shared": "yes"})
    )
    assert MODEL_LABEL not in view.labels
    assert "pool.example.com/shared" not in view.labels


CAPACITY = {
    "cpu": "64",
    "memory": "503Gi",
    "pods": "110",
    "ephemeral-storage": "1Ti",
    "hugepages-2Mi": "0",
    "nvidia.com/gpu": "1",
    VRAM: "15360",
    VRAM_GIB: "15",
    RETIRED: "1",
    "amd.com/gpu": "8",
}


def test_only_the_vram_resources_and_the_amd_card_count_are_kept_of_status() -> None:
    view = keeper_for(ALL_POLICIES).view(gpu_node(capacity=CAPACITY))
    kept = {VRAM: "15360", VRAM_GIB: "15", RETIRED: "1", "amd.com/gpu": "8"}
    assert view.capacity == kept
    assert view.allocatable == kept


@pytest.mark.parametrize(
    ("status", "capacity"),
    [
        pytest.param(None, None, id="no status: None, as the whole node reads"),
        pytest.param({"capacity": None}, None, id="a null capacity: None"),
        pytest.param({"capacity": {}}, {}, id="an empty capacity: empty"),
        pytest.param({"capacity": {"cpu": "1"}}, {}, id="nothing read in capacity: empty"),
    ],
)
def test_a_missing_status_map_stays_missing_and_an_empty_one_empty(
    status: dict[str, Any] | None, capacity: dict[str, str] | None
) -> None:
    node: dict[str, Any] = {"metadata": {"name": "gpu-1"}, "status": status}
    view = keeper_for(ALL_POLICIES).view(node)
    assert view.capacity == capacity
    assert (view.capacity is None) is (NodeView.of(node).capacity is None)


def test_the_name_and_resource_version_are_kept() -> None:
    view = keeper_for(ALL_POLICIES).view(gpu_node("gpu-7"))
    assert (view.name, view.resource_version) == ("gpu-7", "77")


def test_nodes_with_equal_kept_labels_and_resources_share_one_map_each() -> None:
    keeper = keeper_for(ALL_POLICIES)
    first = keeper.view(
        gpu_node("gpu-1", {"kubernetes.io/hostname": "gpu-1"}, {**CAPACITY, "cpu": "64"})
    )
    second = keeper.view(
        gpu_node("gpu-2", {"kubernetes.io/hostname": "gpu-2"}, {**CAPACITY, "cpu": "128"})
    )
    assert first.labels is second.labels
    assert first.capacity is second.capacity
    assert first.capacity is first.allocatable


def test_nodes_with_different_kept_labels_do_not_share() -> None:
    keeper = keeper_for(ALL_POLICIES)
    first = keeper.view(gpu_node("gpu-1"))
    second = keeper.view(gpu_node("gpu-2", {GFD_MEMORY: "23028"}))
    assert first.labels is not second.labels
    assert first.labels[GFD_MEMORY] == "15360"
    assert second.labels[GFD_MEMORY] == "23028"


def test_a_shared_map_cannot_be_changed_through_one_node() -> None:
    keeper = keeper_for(ALL_POLICIES)
    first, second = keeper.view(gpu_node("gpu-1")), keeper.view(gpu_node("gpu-2"))
    with pytest.raises(TypeError):
        cast(dict[str, str], first.labels)[GFD_MEMORY] = "1"
    assert second.labels[GFD_MEMORY] == "15360"


def test_the_whole_node_is_not_changed_by_keeping() -> None:
    node = gpu_node(labels={"kubernetes.io/hostname": "gpu-1"}, capacity=CAPACITY)
    before = copy.deepcopy(node)
    keeper_for(ALL_POLICIES).view(node)
    assert node == before


def test_a_kept_value_that_cannot_be_hashed_is_held_unshared() -> None:
    keeper = keeper_for(ALL_POLICIES)
    node = gpu_node(capacity={VRAM: "1"})
    node["status"]["capacity"][VRAM] = ["not", "a", "quantity"]
    view = keeper.view(node)
    assert view.capacity == {VRAM: ["not", "a", "quantity"]}


@pytest.mark.parametrize(
    "node",
    [
        pytest.param({}, id="no metadata"),
        pytest.param({"metadata": {"labels": {GFD_COUNT: "1"}}}, id="no metadata.name"),
        pytest.param({"metadata": {"name": ""}}, id="an empty name"),
        pytest.param({"metadata": {"name": 7}}, id="a name that is a number"),
        pytest.param({"metadata": {"name": "n", "labels": ["a"]}}, id="labels that are a list"),
        pytest.param({"metadata": {"name": "n"}, "status": {"capacity": "1"}}, id="bad capacity"),
    ],
)
def test_a_malformed_node_raises_malformed_node(node: dict[str, Any]) -> None:
    with pytest.raises(MalformedNode):
        keeper_for(ALL_POLICIES).view(node)


@pytest.mark.parametrize(
    ("policies", "keys"),
    [
        pytest.param([], set(), id="no policies"),
        pytest.param(
            POLICY_SETS["shipped policies"],
            {"nvidia.com/gpu.product", "gpu-admission.example.com/memory-sharing"},
            id="the shipped policy",
        ),
        pytest.param(
            POLICY_SETS["built pools"],
            {
                "nvidia.com/gpu.product",
                MODEL_LABEL,
                "pool.example.com/shared",
                "node.kubernetes.io/instance-type",
                "pool.example.com/gib",
            },
            id="the built pools",
        ),
    ],
)
def test_node_reading_of_policies_reads_their_model_labels_and_selector_keys(
    policies: SharingPolicies, keys: set[str]
) -> None:
    reading = NodeReading.of(policies, [VRAM])
    assert reading.label_keys == keys
    assert reading.resources == {VRAM, "amd.com/gpu"}


def test_policies_without_a_node_selector_read_only_their_model_label() -> None:
    teams: Sequence[tuple[str, Sharing]] = loaded("tests/scenarios/teams/policies")
    assert teams and all(sharing.nodes.selector is None for _, sharing in teams)
    assert NodeReading.of(teams, []).label_keys == {"nvidia.com/gpu.product"}
