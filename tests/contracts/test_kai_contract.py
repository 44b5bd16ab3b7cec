"""The KAI backend against KAI Scheduler's own code (kai_source.py): each pod of the tables
is rewritten by examples/policies/kai, and what the webhook wrote is given to KAI's
admission, scheduler, binder and isolator as transcribed. The webhook must never record or
tell a container more than KAI holds for it, must state the cap KAI's isolator writes, and
must refuse what KAI refuses or would take and never give. docs/backends/kai.md carries
these tables."""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.contracts import kai_source as kai
from tests.support.engine_objects import deployment, mutated, pod, record_of
from tests.support.generated_pods import DEPLOYMENT, POD
from webhook.engine.evaluate import evaluate_pod
from webhook.policy.frameworks import FRAMEWORK_HEADROOM_MIB
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import HardLimit, Policy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policies" / "kai"
MIB = 2**20
# GFD's nvidia.com/gpu.memory, as the catalogue holds it: the A100 figure, and the
# labels of real T4 and H100 nodes (shared node-labels fixtures).
LABELS = {"NVIDIA-A100-SXM4-40GB": "40960", "Tesla-T4": "15360", "NVIDIA-H100-80GB-HBM3": "81559"}


@cache
def policy(hard_limit: HardLimit) -> Policy:
    (example,) = load_policy_directory(EXAMPLE)
    assert example.sharing is not None
    return replace(example, sharing=replace(example.sharing, hard_limit=hard_limit))


def on_model(obj: dict[str, Any], model: str) -> dict[str, Any]:
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": model}
    return obj


def env_of(obj: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in obj["spec"]["containers"][0].get("env", [])}


# (row, what the container asks for, model, what KAI's isolator caps it at: the issue's
# figures and KAI's own doc's "4096 MiB on a 15360 MiB GPU (T4) rounds to 0.27, 4147m")
SHARES = [
    ("0.125 of an A100 40GB", {"nvidia.com/gpu": "0.125"}, "NVIDIA-A100-SXM4-40GB", 4915),
    ("0.333 of an A100 40GB", {"nvidia.com/gpu": "0.333"}, "NVIDIA-A100-SXM4-40GB", 13516),
    ("0.25 of an A100 40GB", {"nvidia.com/gpu": "250m"}, "NVIDIA-A100-SXM4-40GB", 10240),
    ("4Gi of an A100 40GB", {"example.com/vram": "4Gi"}, "NVIDIA-A100-SXM4-40GB", 4505),
    ("6000 MiB of an A100 40GB", {"example.com/vram": "6000"}, "NVIDIA-A100-SXM4-40GB", 6144),
    ("8Gi of an A100 40GB", {"example.com/vram": "8Gi"}, "NVIDIA-A100-SXM4-40GB", 8601),
    ("4096 MiB of a T4", {"example.com/vram": "4096"}, "Tesla-T4", 4147),
    ("0.5 of an H100", {"nvidia.com/gpu": "0.5"}, "NVIDIA-H100-80GB-HBM3", 40779),
]


@pytest.mark.parametrize(("row", "asked", "model", "cap"), SHARES, ids=[r[0] for r in SHARES])
@pytest.mark.parametrize("hard_limit", [HardLimit.NONE, HardLimit.HAMI_CORE], ids=str)
def test_the_record_and_env_never_promise_more_than_kai_gives(
    row: str, asked: dict[str, str], model: str, cap: int, hard_limit: HardLimit
) -> None:
    _, result = mutated(on_model(pod(dict(asked)), model), POD, policy(hard_limit))
    annotations = result["metadata"]["annotations"]
    assert kai.validate_gpu_sharing(result) is None
    assert kai.is_scheduled_by_kai(result)
    binding = kai.bind(annotations, {"nvidia.com/gpu.memory": LABELS[model]})
    limit = None if binding.limit is None else int(binding.limit.removesuffix("m"))
    assert limit == cap, "the oracle agrees with the figures its source gives"
    entry = record_of(result, POD)["containers"]["infer"]
    told = int(entry["vram"])
    assert told <= binding.reserved_mib, "never more than the scheduler holds"
    env = env_of(result)
    seen = int(LABELS[model])
    if hard_limit is HardLimit.HAMI_CORE:
        assert entry["limitMiB"] == str(limit), "the record states the isolator's cap"
        assert told <= limit
        seen = limit  # HAMi-core reports its cap as the device's total
        assert "CUDA_DEVICE_MEMORY_LIMIT" not in env, "KAI's own webhook sets it"
    else:
        assert "limitMiB" not in entry
    framework_mib = told - FRAMEWORK_HEADROOM_MIB
    assert int(env["CUPY_GPU_MEMORY_LIMIT"]) == framework_mib * MIB
    assert float(env["XLA_CLIENT_MEM_FRACTION"]) * seen <= framework_mib
    assert float(env["XLA_CLIENT_MEM_FRACTION"]) * seen > framework_mib - 0.001 * seen


def test_a_fraction_is_written_in_the_hundredths_kai_keeps_rounded_down() -> None:
    for written, kept in (("0.125", "0.12"), ("0.999", "0.99"), ("0.375", "0.37")):
        _, result = mutated(pod({"nvidia.com/gpu": written}), POD, policy(HardLimit.NONE))
        annotation = result["metadata"]["annotations"]["gpu-fraction"]
        assert annotation == kept
        assert kai.bind_request_portion(float(annotation)) == f"{float(kept):.2f}"


# (row, the pod as written, the rule the webhook refuses it by, what KAI does with it)
def _with(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj["spec"].update(spec)
    return obj


REFUSED = [
    (
        "a pod that names its node",
        _with(pod({"nvidia.com/gpu": "0.25"}), nodeName="gpu-7"),
        "node-assigned",
        "never scheduled: taken for bound",
    ),
    (
        "gpu-fraction with three decimals",
        pod(annotations={"gpu-fraction": "0.125"}),
        "fraction-places",
        'passed on as "0.12"',
    ),
    (
        "under a hundredth of a card",
        pod({"nvidia.com/gpu": "0.004"}),
        "share-too-small",
        'passed on as "0.00": no cap',
    ),
    (
        "all of an A100's memory label",
        on_model(pod({"example.com/vram": "40960"}), "NVIDIA-A100-SXM4-40GB"),
        "share-too-large",
        "a portion of 1.01, which never fits",
    ),
    (
        "a share on two cards",
        pod({"nvidia.com/gpu": "0.5"}, annotations={"gpu-fraction-num-devices": "2"}),
        "fraction-devices",
        "the share on each of 2 cards",
    ),
]


@pytest.mark.parametrize(("row", "obj", "rule", "kai_does"), REFUSED, ids=[r[0] for r in REFUSED])
def test_what_kai_refuses_or_would_not_give_is_refused_here(
    row: str, obj: dict[str, Any], rule: str, kai_does: str
) -> None:
    outcome = evaluate_pod(copy.deepcopy(obj), POD, policy(HardLimit.HAMI_CORE), "mutate")
    assert [v.rule for v in outcome.violations] == [rule]
    # What KAI's own code makes of the pod as it was written, with its scheduler named.
    as_kai_sees = _with(copy.deepcopy(obj), schedulerName="kai-scheduler")
    annotations = as_kai_sees["metadata"].get("annotations", {})
    label = {"nvidia.com/gpu.memory": "40960"}
    if rule == "node-assigned":
        assert not kai.is_scheduled_by_kai(as_kai_sees)
    elif rule == "fraction-places":
        assert kai.bind(annotations, label).portion == "0.12" != annotations["gpu-fraction"]
    elif rule == "share-too-small":
        assert kai.hami_core_limit(label, kai.bind_request_portion(0.004)) is None
    elif rule == "share-too-large":
        memory, _ = kai.get_node_gpu_memory("40960")
        assert kai.gpu_memory_fractional_on_node(40960, memory) > 1
    else:
        assert (
            kai.validate_gpu_sharing(
                {"metadata": {"annotations": {**annotations, "gpu-fraction": "0.5"}}}
            )
            is None
        ), "KAI takes it, and gives the share on each card"


def test_kai_refuses_what_the_webhook_refuses_in_its_annotations() -> None:
    """KAI's validator and the webhook agree on the annotations a user writes."""
    for written, rule in (
        ({"gpu-fraction": "1"}, "annotation-fraction"),
        ({"gpu-memory": "4Gi"}, "annotation-memory"),
        ({"gpu-fraction": "0.5", "gpu-memory": "2000"}, "annotation-conflict"),
    ):
        obj = pod(annotations=dict(written))
        outcome = evaluate_pod(obj, POD, policy(HardLimit.NONE), "mutate")
        assert rule in [v.rule for v in outcome.violations]
        assert kai.validate_gpu_sharing(obj) is not None


@pytest.mark.parametrize(
    ("owner", "template", "queue"),
    [
        ({"kai.scheduler/queue": "team-a"}, {}, "team-a"),
        ({}, {}, "default-queue"),
        ({"kai.scheduler/queue": "team-a"}, {"kai.scheduler/queue": "team-a"}, "team-a"),
    ],
    ids=["the owner's", "the policy's", "both the same"],
)
def test_the_queue_written_and_recorded_is_the_one_kai_reads(
    owner: dict[str, str], template: dict[str, str], queue: str
) -> None:
    obj = deployment(pod({"nvidia.com/gpu": "0.5"}))
    obj["metadata"]["labels"] = dict(owner)
    obj["spec"]["template"].setdefault("metadata", {})["labels"] = dict(template)
    _, result = mutated(obj, DEPLOYMENT, policy(HardLimit.NONE))
    pod_labels = result["spec"]["template"]["metadata"]["labels"]
    assert kai.calc_pod_group_queue(result["metadata"]["labels"], pod_labels) == queue
    assert pod_labels["kai.scheduler/queue"] == queue
    recorded = record_of(result, DEPLOYMENT).get("labels", {})
    assert recorded.get("kai.scheduler/queue", queue) == queue


def test_a_template_queue_kai_never_reads_is_refused() -> None:
    obj = deployment(pod({"nvidia.com/gpu": "0.5"}))
    obj["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    obj["spec"]["template"].setdefault("metadata", {})["labels"] = {"kai.scheduler/queue": "b"}
    outcome = evaluate_pod(obj, DEPLOYMENT, policy(HardLimit.NONE), "mutate")
    assert [v.rule for v in outcome.violations] == ["queue-conflict"]
    assert kai.calc_pod_group_queue({"kai.scheduler/queue": "team-a"}, {"x": "b"}) == "team-a"


def test_a_workload_another_object_owns_keeps_the_policys_queue_on_its_pods() -> None:
    """KAI reads the top owner's label first, which the webhook cannot see through an owner
    reference: the pods' own label (KAI's second choice) is the policy's."""
    obj = deployment(pod({"nvidia.com/gpu": "0.5"}))
    obj["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    obj["metadata"]["ownerReferences"] = [{"kind": "Foo", "name": "f", "controller": True}]
    _, result = mutated(obj, DEPLOYMENT, policy(HardLimit.NONE))
    assert result["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] == (
        "default-queue"
    )


@pytest.mark.parametrize("owner", [{"kai.scheduler/queue": "team-a"}, {}], ids=["own", "none"])
def test_what_a_controller_makes_from_a_rewritten_workload_passes_unchanged(
    owner: dict[str, str],
) -> None:
    """A ReplicaSet and its pods carry the Deployment's rewritten template under an owner the
    webhook cannot see: rewriting them again would set them apart from their template, and
    the Deployment controller would make ReplicaSet after ReplicaSet."""
    obj = deployment(pod({"nvidia.com/gpu": "0.125"}))
    obj["metadata"]["labels"] = dict(owner)
    _, result = mutated(obj, DEPLOYMENT, policy(HardLimit.HAMI_CORE))
    template = copy.deepcopy(result["spec"]["template"])
    owned = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "controller": True}]
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "d-5f7", "labels": dict(template["metadata"]["labels"])},
        "spec": {"template": template},
    }
    replica_set["metadata"]["ownerReferences"] = owned
    child = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**copy.deepcopy(template["metadata"]), "ownerReferences": owned},
        "spec": copy.deepcopy(template["spec"]),
    }
    for made, location in ((replica_set, DEPLOYMENT), (child, POD)):
        outcome = evaluate_pod(made, location, policy(HardLimit.HAMI_CORE), "mutate")
        assert outcome.violations == () and outcome.operations == (), outcome
    pod_labels = template["metadata"]["labels"]
    expected = owner.get("kai.scheduler/queue", "default-queue")
    assert kai.calc_pod_group_queue(owner, pod_labels) == pod_labels[kai.QUEUE_LABEL] == expected


def test_an_empty_queue_on_the_workload_is_refused() -> None:
    obj = deployment(pod({"nvidia.com/gpu": "0.5"}))
    obj["metadata"]["labels"] = {"kai.scheduler/queue": ""}
    outcome = evaluate_pod(obj, DEPLOYMENT, policy(HardLimit.NONE), "mutate")
    assert [v.rule for v in outcome.violations] == ["queue-conflict"]
    assert kai.calc_pod_group_queue({"kai.scheduler/queue": ""}, {}) == ""


def test_in_gib_a_fraction_kai_holds_under_one_unit_is_refused_not_recorded_as_none() -> None:
    """0.025 of an A100 is 1 GiB as sized, but KAI keeps 0.02, 818 MiB: under a GiB."""
    base = policy(HardLimit.NONE)
    assert base.sharing is not None
    in_gib = replace(base, sharing=replace(base.sharing, unit="GiB", frameworks=()))
    outcome = evaluate_pod(pod({"nvidia.com/gpu": "0.025"}), POD, in_gib, "mutate")
    assert [v.rule for v in outcome.violations] == ["share-too-small"]
    assert "818 MiB" in outcome.violations[0].message
    held = kai.bind({"gpu-fraction": "0.02"}, {"nvidia.com/gpu.memory": "40960"}).reserved_mib
    assert held == 818
