"""The MIG profiles the nodes advertise: kept from a watch of the nodes, and preferred by the
MIG backend over the catalogue's, where it has seen some for the pod's model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_objects import mutated, pod, pod_request
from tests.support.generated_pods import POD
from webhook.admission.decide import decide
from webhook.engine.evaluate import evaluate_pod
from webhook.engine.inventory import MigInventory
from webhook.engine.outcome_cache import OutcomeCache
from webhook.engine.pod_spec import pod_parts
from webhook.kube.node_inventory import NodeInventory, node_gpus
from webhook.kube.on_demand_inventory import OnDemandNodeInventory
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import Policy
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError
from webhook.policy.store import ReloadStatus, ServedSet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
A100 = "NVIDIA-A100-SXM4-40GB"


def example(backend: str) -> Policy:
    (policy,) = load_policy_directory(EXAMPLES / backend)
    return policy


def node(name: str, product: str | None, **allocatable: str) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": product} if product else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "8", **allocatable}},
    }


class Offline(NodeInventory):
    """The inventory without its informer: the tests hand it nodes as the informer does, each
    through `keep`."""

    def __init__(self, max_nodes: int = 10) -> None:
        from kubernetes.client import ApiClient

        super().__init__(ApiClient(), max_nodes=max_nodes)

    def saw_list(self, nodes: list[dict[str, Any]]) -> None:
        self.listed([kept for kept in map(self.keep, nodes) if kept is not None])

    def saw(self, event_type: str, obj: dict[str, Any]) -> None:
        kept = self.keep(obj)
        if kept is not None:
            self.changed(event_type, kept)


@pytest.mark.parametrize(
    ("given", "found"),
    [
        (
            node("a", A100, **{"nvidia.com/mig-1g.5gb": "7"}),
            (A100, {"nvidia.com/mig-1g.5gb": None}),
        ),
        (node("a", A100, **{"nvidia.com/mig-1g.5gb": "0"}), None),
        (node("a", A100, **{"nvidia.com/gpu": "8"}), None),
        (node("a", None, **{"nvidia.com/mig-1g.5gb": "7"}), None),
        ({"metadata": {"name": "a"}}, None),
    ],
    ids=["profiles", "none left", "whole GPUs", "no product label", "no status"],
)
def test_a_node_is_read_as_its_product_and_the_mig_devices_it_has(
    given: dict[str, Any], found: tuple[str, dict[str, int | None]] | None
) -> None:
    read = node_gpus(given)
    assert (read if read is None else (read[0], dict(read[1]))) == found


def test_a_nodes_label_gives_the_memory_of_its_mig_instances() -> None:
    labelled = node("a", A100, **{"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-2g.20gb": "1"})
    labelled["metadata"]["labels"]["nvidia.com/mig-1g.10gb.memory"] = "9728"
    labelled["metadata"]["labels"]["nvidia.com/mig-2g.20gb.memory"] = "many"
    read = node_gpus(labelled)
    assert read is not None
    assert dict(read[1]) == {"nvidia.com/mig-1g.10gb": 9728, "nvidia.com/mig-2g.20gb": None}


def test_the_snapshot_is_the_union_by_product_and_changes_only_when_it_does() -> None:
    inventory = Offline()
    assert inventory.mig_inventory().version == 0
    inventory.saw_list(
        [
            node("a", A100, **{"nvidia.com/mig-1g.5gb": "7"}),
            node("b", A100, **{"nvidia.com/mig-3g.20gb": "2"}),
            node("c", "Tesla-T4", **{"nvidia.com/gpu": "1"}),
        ]
    )
    first = inventory.mig_inventory()
    assert set(first.advertised(A100) or {}) == {"nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"}
    assert first.advertised("Tesla-T4") is None
    # A heartbeat of a node changes nothing that is kept.
    inventory.saw("MODIFIED", node("a", A100, **{"nvidia.com/mig-1g.5gb": "7"}))
    assert inventory.mig_inventory() is first
    inventory.saw("DELETED", node("b", A100))
    assert set(inventory.mig_inventory().advertised(A100) or {}) == {"nvidia.com/mig-1g.5gb"}
    assert inventory.mig_inventory().version == first.version + 1


def test_no_more_than_max_nodes_are_kept() -> None:
    inventory = Offline(max_nodes=2)
    nodes = [node(f"n{i}", f"P-{i}", **{"nvidia.com/mig-1g.5gb": "1"}) for i in range(5)]
    inventory.saw_list(nodes)
    assert len(inventory.mig_inventory().by_product) == 2
    inventory.saw("ADDED", node("late", "P-late", **{"nvidia.com/mig-1g.5gb": "1"}))
    assert inventory.mig_inventory().advertised("P-late") is None


def inventory_of(*resources: str, version: int = 7) -> MigInventory:
    return MigInventory({A100: dict.fromkeys(resources)}, version=version)


@pytest.mark.parametrize(
    ("advertised", "profile"),
    [
        (("nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb"), "2g.10gb"),
        (("nvidia.com/mig-3g.20gb",), "3g.20gb"),
        ((), "1g.10gb"),
    ],
    ids=["the smallest advertised", "only a larger one advertised", "nothing seen: catalogue"],
)
def test_mig_chooses_among_the_profiles_the_models_nodes_advertise(
    advertised: tuple[str, ...], profile: str
) -> None:
    inventory = inventory_of(*advertised) if advertised else MigInventory({}, version=3)
    obj = pod({"example.com/vram": "5Gi"})
    outcome = evaluate_pod(obj, POD, example("mig"), "mutate", inventory=inventory)
    limits = [op for op in outcome.operations if "/limits/" in op["path"] and op["op"] == "add"]
    assert [op["path"].rsplit("/", 1)[1] for op in limits] == [f"nvidia.com~1mig-{profile}"]


def test_a_profile_the_catalogue_lacks_is_sized_by_the_nodes_label() -> None:
    # The catalogue has no 1g.6gb for this card; the nodes say its instances have 6144 MiB.
    inventory = MigInventory(
        {A100: {"nvidia.com/mig-1g.6gb": 6144, "nvidia.com/mig-9g.9gb": None}}, 2
    )
    obj = pod({"example.com/vram": "5Gi"})
    outcome = evaluate_pod(obj, POD, example("mig"), "mutate", inventory=inventory)
    added = [
        op["path"] for op in outcome.operations if op["op"] == "add" and "/limits/" in op["path"]
    ]
    assert added == ["/spec/containers/0/resources/limits/nvidia.com~1mig-1g.6gb"]


def test_a_share_no_advertised_profile_holds_is_denied_naming_what_would() -> None:
    obj = pod({"example.com/vram": "5Gi"})
    outcome = evaluate_pod(
        obj, POD, example("mig"), "mutate", inventory=inventory_of("nvidia.com/mig-1g.5gb")
    )
    (violation,) = outcome.violations
    assert violation.rule == "no-mig-profile"
    assert "1g.5gb (4864 MiB); 1g.10gb would" in violation.message


def test_an_outcome_is_kept_for_the_snapshot_it_was_judged_under() -> None:
    cache = OutcomeCache()
    obj = pod({"example.com/vram": "5Gi"})
    parts = pod_parts(obj, POD)
    policy = example("mig")
    small = cache.evaluate(
        obj, POD, parts, policy, "mutate", inventory_of("nvidia.com/mig-2g.10gb")
    )
    large = inventory_of("nvidia.com/mig-3g.20gb", version=8)
    assert cache.evaluate(obj, POD, parts, policy, "mutate", large) != small
    assert cache.evaluate(obj, POD, parts, policy, "mutate", inventory_of("x")) is small
    # A new snapshot is judged afresh, even where it gives the same answer.
    fresh = inventory_of("nvidia.com/mig-2g.10gb", version=9)
    again = cache.evaluate(obj, POD, parts, policy, "mutate", fresh)
    assert again == small and again is not small


class Counting:
    def __init__(self) -> None:
        self.asked = 0

    def mig_inventory(self) -> MigInventory:
        self.asked += 1
        return inventory_of("nvidia.com/mig-3g.20gb")


def test_only_policies_whose_backend_reads_nodes_ask_for_the_snapshot() -> None:
    obj = pod({"example.com/vram": "6Gi"})
    for backend, asked in (("extended-resource", 0), ("mig", 1)):
        source = Counting()
        decide(pod_request(obj), PolicySet((example(backend),)), "mutate", None, source)
        assert source.asked == asked


def test_the_nodes_are_read_only_once_a_served_policy_is_mig() -> None:
    connected: list[str] = []

    def connect(mode: str) -> Counting:
        connected.append(mode)
        return Counting()

    on_demand = OnDemandNodeInventory("kubeconfig", connect)
    for backend, expected in (("extended-resource", []), ("mig", ["kubeconfig"])):
        served = ServedSet(PolicySet((example(backend),)), None, datetime.now(UTC), "given")
        on_demand.policies_observed(None, served, ReloadStatus())
        assert connected == expected
    assert set(on_demand.mig_inventory().advertised(A100) or {}) == {"nvidia.com/mig-3g.20gb"}
    with pytest.raises(ValueError, match="node inventory mode 'sometimes'"):
        OnDemandNodeInventory("sometimes")


def test_the_example_pod_shape_is_still_mutated_alike_without_a_cluster() -> None:
    _, result = mutated(pod({"example.com/vram": "5Gi"}), POD, example("mig"))
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}


def test_a_profile_name_this_backend_does_not_give_is_passed_over() -> None:
    # A compute-instance profile: not a device this backend gives, and never a crash.
    inventory = MigInventory({A100: {"nvidia.com/mig-1c.3g.20gb": 20096}}, 4)
    outcome = evaluate_pod(
        pod({"example.com/vram": "5Gi"}), POD, example("mig"), "mutate", inventory=inventory
    )
    assert [v.rule for v in outcome.violations] == ["no-mig-profile"]


def test_nodes_labelled_with_a_models_alias_count_as_that_model() -> None:
    inventory = MigInventory({f"{A100}-SHARED": {"nvidia.com/mig-3g.20gb": None}}, 5)
    outcome = evaluate_pod(
        pod({"example.com/vram": "5Gi"}), POD, example("mig"), "mutate", inventory=inventory
    )
    added = [
        op["path"] for op in outcome.operations if op["op"] == "add" and "/limits/" in op["path"]
    ]
    assert added == ["/spec/containers/0/resources/limits/nvidia.com~1mig-3g.20gb"]


# --- a model the catalogue lacks, sized from its nodes ------------------------------------------

NEW_CARD = "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
EVERY_MODEL = """apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata:
  name: every-model
spec:
  gpuResources:
    - name: nvidia.com/gpu
      fractions: Rewrite
  sharing:
    vramResource: example.com/vram
"""


def labelled(name: str, product: str, memory: str) -> dict[str, Any]:
    found = node(name, product, **{"nvidia.com/gpu": "1"})
    found["metadata"]["labels"]["nvidia.com/gpu.memory"] = memory
    return found


def every_model_policy(tmp_path: Path, models: str = "") -> Policy:
    (tmp_path / "policy.yaml").write_text(EVERY_MODEL + models)
    (policy,) = load_policy_directory(tmp_path)
    return policy


def test_nodes_give_each_products_memory_the_least_where_they_differ() -> None:
    inventory = Offline()
    inventory.saw_list(
        [
            labelled("a", NEW_CARD, "97887"),
            labelled("b", NEW_CARD, "97871"),
            labelled("c", "Tesla-T4", "not a number"),
        ]
    )
    snapshot = inventory.mig_inventory()
    assert snapshot.memory_of(NEW_CARD) == 97871
    assert snapshot.memory_of("Tesla-T4") is None
    inventory.saw("DELETED", labelled("b", NEW_CARD, "97871"))
    assert inventory.mig_inventory().memory_of(NEW_CARD) == 97887
    assert inventory.mig_inventory().version == snapshot.version + 1


def test_a_pool_of_every_model_sizes_one_the_catalogue_lacks_from_its_nodes(
    tmp_path: Path,
) -> None:
    policy = every_model_policy(tmp_path)
    assert policy.sharing is not None and policy.sharing.reads_nodes
    obj = pod({"nvidia.com/gpu": "0.25"})
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": NEW_CARD}
    inventory = MigInventory(memory_by_product={NEW_CARD: 97871}, version=3)
    outcome = evaluate_pod(obj, POD, policy, "mutate", inventory=inventory)
    assert outcome.violations == ()
    assert f"example.com/vram=24467 MiB of {NEW_CARD}" in outcome.rewritten


@pytest.mark.parametrize(
    ("models", "fragment"),
    [
        pytest.param("", "no node labels its memory (nvidia.com/gpu.memory)", id="no node seen"),
        pytest.param("    models: [Tesla-T4]\n", "or to a GPUModelCatalogue", id="a listed pool"),
    ],
)
def test_a_model_neither_the_pool_nor_its_nodes_know_is_denied_naming_how_to_add_it(
    tmp_path: Path, models: str, fragment: str
) -> None:
    policy = every_model_policy(tmp_path, models)
    obj = pod({"nvidia.com/gpu": "0.25"})
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": NEW_CARD}
    # A listed pool takes only its models, whatever the nodes say.
    inventory = MigInventory(memory_by_product={NEW_CARD: 97871}) if models else MigInventory()
    (violation,) = evaluate_pod(obj, POD, policy, "mutate", inventory=inventory).violations
    assert violation.rule == "model-unknown"
    assert "add the model to its spec.sharing.models (written whole with its memoryMiB)" in (
        violation.message
    )
    # Only where the model's nodes are this pool's: another pool's policy selects it by model.
    assert "the pod belongs to that pool's policy" in violation.message
    assert fragment in violation.message


def test_lint_names_both_ways_to_add_a_model_the_catalogue_lacks(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(EVERY_MODEL + f"    models: [{NEW_CARD}]\n")
    with pytest.raises(PolicyLoadError) as error:
        load_policy_directory(tmp_path)
    (problem,) = error.value.problems
    assert f"write it here whole ({{product: {NEW_CARD}, memoryMiB:" in str(problem)
    assert "or add it to a GPUModelCatalogue document beside the policies" in str(problem)
