"""One intent, every sharing backend: the same pods rendered by each example policy
(examples/policies/<backend>), each result held to the apiserver's rules for extended
resources, passed by /validate, and left alone by a second pass."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_objects import deployment, mutated, pod, record_of, spec_of
from tests.support.generated_pods import DEPLOYMENT, POD
from webhook.engine.evaluate import evaluate_pod
from webhook.policy.frameworks import FRAMEWORK_HEADROOM_MIB
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import Policy
from webhook.policy.problems import PolicyLoadError
from webhook.quantity import parse_quantity

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
BACKENDS = ("extended-resource", "gpushare", "hami", "time-slicing", "mig", "kai")


@cache
def example(backend: str) -> Policy:
    (policy,) = load_policy_directory(EXAMPLES / backend)
    return policy


def limits_of(obj: dict[str, Any], location: Any = POD, index: int = 0) -> dict[str, Any]:
    container = spec_of(obj, location)["containers"][index]
    return dict(container.get("resources", {}).get("limits", {}))


def env_of(obj: dict[str, Any], location: Any = POD) -> dict[str, str]:
    container = spec_of(obj, location)["containers"][0]
    return {item["name"]: item["value"] for item in container.get("env", [])}


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations", {}))


def assert_apiserver_accepts(obj: dict[str, Any], location: Any) -> None:
    """The apiserver's rules for extended resources (a name with a domain, outside
    kubernetes.io): whole numbers, in limits, and requests equal to limits."""
    for container in spec_of(obj, location)["containers"]:
        resources = container.get("resources", {})
        limits, requests = resources.get("limits", {}), resources.get("requests", {})
        for name in {*limits, *requests}:
            if "/" not in name or "kubernetes.io/" in name:
                continue
            assert name in limits, f"{name} only in requests"
            assert parse_quantity(limits[name]).denominator == 1, f"{name}={limits[name]}"
            if name in requests:
                assert parse_quantity(requests[name]) == parse_quantity(limits[name])


QUARTER = {"nvidia.com/gpu": "0.25"}
FOUR_GIB = {"example.com/vram": "4Gi"}
T4 = {"nvidia.com/gpu.product": "Tesla-T4"}

# One intent per row, and what each backend makes of it on a card the row names (the
# examples' default model is the A100 40GB, 40960 MiB).
RENDERED: list[tuple[str, dict[str, str], dict[str, str] | None, str, dict[str, str]]] = [
    ("quarter", QUARTER, None, "extended-resource", {"example.com/vram": "10240"}),
    ("quarter", QUARTER, None, "gpushare", {"aliyun.com/gpu-mem": "10"}),
    (
        "quarter",
        QUARTER,
        None,
        "hami",
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10240"},
    ),
    ("quarter", QUARTER, None, "time-slicing", {"nvidia.com/gpu.shared": "1"}),
    # 10240 MiB is more than a 1g.10gb instance has (9984): the next profile up.
    ("quarter", QUARTER, None, "mig", {"nvidia.com/mig-3g.20gb": "1"}),
    ("quarter", QUARTER, None, "kai", {}),
    ("4Gi", FOUR_GIB, None, "extended-resource", {"example.com/vram": "4096"}),
    ("4Gi", FOUR_GIB, None, "gpushare", {"aliyun.com/gpu-mem": "4"}),
    ("4Gi", FOUR_GIB, None, "hami", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"}),
    ("4Gi", FOUR_GIB, None, "time-slicing", {"nvidia.com/gpu.shared": "1"}),
    ("4Gi", FOUR_GIB, None, "mig", {"nvidia.com/mig-1g.5gb": "1"}),
    ("4Gi", FOUR_GIB, None, "kai", {}),
    ("quarter of a T4", QUARTER, T4, "extended-resource", {"example.com/vram": "3840"}),
    # GiB are whole: a quarter of 15 GiB is 3 of them, never more than was asked.
    ("quarter of a T4", QUARTER, T4, "gpushare", {"aliyun.com/gpu-mem": "3"}),
    ("quarter of a T4", QUARTER, T4, "hami", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3840"}),
    ("quarter of a T4", QUARTER, T4, "time-slicing", {"nvidia.com/gpu.shared": "1"}),
    ("quarter of a T4", QUARTER, T4, "kai", {}),
]

# What KAI carries on the pod instead of resources, for the same rows.
KAI_ANNOTATIONS = {
    "quarter": {"gpu-fraction": "0.25"},
    "4Gi": {"gpu-memory": "4096"},
    "quarter of a T4": {"gpu-fraction": "0.25"},
}


def with_selector(obj: dict[str, Any], selector: dict[str, str] | None) -> dict[str, Any]:
    if selector:
        obj["spec"]["nodeSelector"] = dict(selector)
    return obj


@pytest.mark.parametrize(
    ("limits", "selector", "backend", "expected"),
    [row[1:] for row in RENDERED],
    ids=[f"{row[0]}-{row[3]}" for row in RENDERED],
)
def test_one_intent_is_rendered_by_every_backend(
    limits: dict[str, str], selector: dict[str, str] | None, backend: str, expected: dict[str, str]
) -> None:
    for location, obj in (
        (POD, with_selector(pod(dict(limits)), selector)),
        (DEPLOYMENT, deployment(with_selector(pod(dict(limits)), selector))),
    ):
        _, result = mutated(obj, location, example(backend))
        assert limits_of(result, location) == expected
        assert_apiserver_accepts(result, location)
        record = record_of(result, location)
        assert record["containers"]["infer"]["asked"] == next(f"{k}={v}" for k, v in limits.items())
    if backend == "kai":
        metadata = result["spec"]["template"]["metadata"]
        row = next(r[0] for r in RENDERED if r[1] == limits and r[2] == selector)
        assert {k: metadata["annotations"][k] for k in KAI_ANNOTATIONS[row]} == KAI_ANNOTATIONS[row]
        assert metadata["labels"]["kai.scheduler/queue"] == "default-queue"
        assert spec_of(result, DEPLOYMENT)["schedulerName"] == "kai-scheduler"


def test_every_backend_has_an_example_and_a_row() -> None:
    assert sorted(path.name for path in EXAMPLES.iterdir() if path.is_dir()) == sorted(BACKENDS)
    assert {row[3] for row in RENDERED} == set(BACKENDS)


# The device memory a process of a 4 GiB share on an A100 40GB sees, of which its frameworks
# take their fraction: the card; the share itself under HAMi-core; the MIG slice (1g.5gb).
SEEN_OF_FOUR_GIB = {
    "extended-resource": 40960,
    "gpushare": 40960,
    "time-slicing": 40960,
    "kai": 40960,
    "hami": 4096,
    "mig": 4864,
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_keeps_each_framework_inside_the_share_with_room_to_spare(
    backend: str,
) -> None:
    _, result = mutated(pod(dict(FOUR_GIB)), POD, example(backend))
    env = env_of(result)
    room = 4096 - FRAMEWORK_HEADROOM_MIB
    seen = SEEN_OF_FOUR_GIB[backend]
    fraction = Fraction(env["XLA_CLIENT_MEM_FRACTION"])
    # Rounded down, by less than a ten-thousandth of what the framework sees.
    assert fraction * seen <= room < (fraction + Fraction(1, 10**4)) * seen
    assert (
        env["PYTORCH_CUDA_ALLOC_CONF"]
        == f"per_process_memory_fraction:{env['XLA_CLIENT_MEM_FRACTION']}"
    )
    assert int(env["CUPY_GPU_MEMORY_LIMIT"]) == room * 2**20
    # The example of the ExtendedResource pool runs an MPS daemon: the driver's hard limit.
    hard = env.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
    assert hard == ("0=4096M" if backend == "extended-resource" else None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_going_back_to_a_whole_gpu_leaves_nothing_of_the_backends_form(backend: str) -> None:
    policy = example(backend)
    _, shared = mutated(deployment(pod(dict(QUARTER))), DEPLOYMENT, policy)
    edited = copy.deepcopy(shared)
    template = edited["spec"]["template"]
    container = template["spec"]["containers"][0]
    limits = container.setdefault("resources", {}).setdefault("limits", {})
    limits["nvidia.com/gpu"] = "1"
    if backend == "hami":
        # HAMi's share keeps nvidia.com/gpu: 1, so a whole GPU written over it looks the same;
        # the memory line goes too (docs/backends/hami.md).
        del limits["nvidia.com/gpumem"]
    _, result = mutated(edited, DEPLOYMENT, policy)
    assert limits_of(result, DEPLOYMENT) == {"nvidia.com/gpu": "1"}
    metadata = result["spec"]["template"]["metadata"]
    assert not set(metadata.get("annotations", {})) & {"gpu-fraction", "gpu-memory"}
    assert "kai.scheduler/queue" not in metadata.get("labels", {})
    spec = spec_of(result, DEPLOYMENT)
    assert "schedulerName" not in spec
    assert env_of(result, DEPLOYMENT) == {}
    tolerated = {t["key"] for t in spec.get("tolerations", [])}
    assert tolerated == {"nvidia.com/gpu"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_fraction_put_back_beside_the_backends_form_gives_the_same_object(backend: str) -> None:
    # kubectl apply writes the manifest's nvidia.com/gpu: 0.25 again on every apply.
    _, shared = mutated(deployment(pod(dict(QUARTER))), DEPLOYMENT, example(backend))
    applied = copy.deepcopy(shared)
    container = applied["spec"]["template"]["spec"]["containers"][0]
    container.setdefault("resources", {}).setdefault("limits", {}).update(QUARTER)
    _, result = mutated(applied, DEPLOYMENT, example(backend))
    assert result == shared


def test_a_policy_moved_to_another_backend_rewrites_the_share_and_nothing_stays() -> None:
    _, as_vram = mutated(deployment(pod(dict(FOUR_GIB))), DEPLOYMENT, example("extended-resource"))
    _, as_mig = mutated(as_vram, DEPLOYMENT, example("mig"))
    assert limits_of(as_mig, DEPLOYMENT) == {"nvidia.com/mig-1g.5gb": "1"}
    tolerated = {t["key"] for t in spec_of(as_mig, DEPLOYMENT)["tolerations"]}
    assert tolerated == {"nvidia.com/mig-1g.5gb"}
    assert record_of(as_mig, DEPLOYMENT)["containers"]["infer"]["asked"] == "example.com/vram=4Gi"


# HAMi --------------------------------------------------------------------------------------


def rules(obj: dict[str, Any], policy: Policy, mode: Any = "mutate") -> list[str]:
    return [violation.rule for violation in evaluate_pod(obj, POD, policy, mode).violations]


def test_hami_a_pod_in_hamis_dialect_is_checked_and_not_rewritten() -> None:
    written = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}
    _, result = mutated(pod(dict(written)), POD, example("hami"))
    assert limits_of(result) == written
    # HAMi-core reports the 3000 MiB as the device's total: the fractions are of it.
    assert env_of(result)["XLA_CLIENT_MEM_FRACTION"] == "0.8293"
    assert env_of(result)["CUPY_GPU_MEMORY_LIMIT"] == str((3000 - 512) * 2**20)


@pytest.mark.parametrize(
    "written",
    [
        {"nvidia.com/gpu": "2", "nvidia.com/gpumem-percentage": "50", "nvidia.com/gpucores": "30"},
        {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "40"},
    ],
    ids=["percent over two cards", "percent of one card"],
)
def test_hami_shares_it_does_not_size_pass_as_written(written: dict[str, str]) -> None:
    obj = pod(dict(written))
    outcome = evaluate_pod(obj, POD, example("hami"), "mutate")
    assert outcome.violations == ()
    assert all("/resources/" not in op["path"] for op in outcome.operations)


@pytest.mark.parametrize(
    ("written", "rule", "hint"),
    [
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "99.1"}, "whole-percent", '"99"'),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "101"}, "whole-percent", "100"),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4.5"}, "whole-number", "whole number"),
    ],
    ids=["percent rounded", "cores above 100", "memory not whole"],
)
def test_hami_values_its_webhook_would_round_or_drop_are_denied(
    written: dict[str, str], rule: str, hint: str
) -> None:
    outcome = evaluate_pod(pod(dict(written)), POD, example("hami"), "mutate")
    assert [v.rule for v in outcome.violations] == [rule]
    assert hint in outcome.violations[0].message


def test_hami_memory_written_as_bytes_is_rewritten_into_mib() -> None:
    # HAMi reads 4Gi as 4294967296 MiB and drops it; the webhook writes 4096.
    written = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4Gi"}
    _, result = mutated(pod(dict(written)), POD, example("hami"))
    assert limits_of(result) == {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"}


def test_hami_resources_written_as_annotations_are_denied() -> None:
    obj = pod({"nvidia.com/gpu": "1"}, annotations={"nvidia.com/gpumem": "4096"})
    assert rules(obj, example("hami")) == ["hami-annotation"]


def test_backends_with_a_scheduler_of_their_own_refuse_a_pod_bound_to_another() -> None:
    for backend in ("hami", "kai", "gpushare"):
        obj = pod(dict(QUARTER))
        obj["spec"]["schedulerName"] = "volcano"
        assert rules(obj, example(backend)) == ["scheduler-conflict"]
        assert rules(obj, example(backend), "validate") == ["scheduler-conflict"]
        obj["spec"]["schedulerName"] = "default-scheduler"
        assert rules(obj, example(backend)) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_share_that_names_its_node_is_refused_where_only_a_scheduler_gives_it(
    backend: str,
) -> None:
    """HAMi and KAI give a share through their scheduler, which a nodeName bypasses; the
    others count it on the node, where the kubelet admits it as any pod."""
    wanted = ["node-assigned"] if backend in ("hami", "kai") else []
    bound = pod(dict(QUARTER))
    bound["spec"]["nodeName"] = "gpu-7"
    assert rules(bound, example(backend)) == wanted
    template = deployment(copy.deepcopy(bound))
    outcome = evaluate_pod(template, DEPLOYMENT, example(backend), "mutate")
    assert [v.rule for v in outcome.violations] == wanted


def test_hami_percentage_mode_rounds_the_share_down_to_a_whole_percent() -> None:
    from dataclasses import replace

    policy = example("hami")
    assert policy.sharing is not None
    hami = replace(policy.sharing.hami, memory="Percentage", cores=True)
    in_percent = replace(policy, sharing=replace(policy.sharing, hami=hami))
    _, result = mutated(pod({"nvidia.com/gpu": "0.251"}), POD, in_percent)
    assert limits_of(result) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem-percentage": "25",
        "nvidia.com/gpucores": "25",
    }
    # HAMi holds the container to 25% of the card (10240 MiB), and its env stays inside that.
    assert env_of(result)["CUPY_GPU_MEMORY_LIMIT"] == str((10240 - 512) * 2**20)
    assert env_of(result)["XLA_CLIENT_MEM_FRACTION"] == "0.95"


# KAI ---------------------------------------------------------------------------------------


def two_containers(first: dict[str, str], second: dict[str, str]) -> dict[str, Any]:
    obj = pod(dict(first))
    obj["spec"]["containers"].append(
        {"name": "sidecar", "image": "cuda:12", "resources": {"limits": dict(second)}}
    )
    return obj


def test_kai_names_the_container_when_the_share_is_not_the_first_ones() -> None:
    obj = two_containers({}, QUARTER)
    _, result = mutated(obj, POD, example("kai"))
    assert annotations_of(result)["gpu-fraction-container-name"] == "sidecar"
    assert annotations_of(result)["gpu-fraction"] == "0.25"


@pytest.mark.parametrize("backend", ["kai", "gpushare"])
def test_backends_that_give_one_container_a_share_deny_two(backend: str) -> None:
    assert rules(two_containers(QUARTER, QUARTER), example(backend)) == ["one-share-per-pod"]


def test_kai_keeps_the_queue_a_pod_names() -> None:
    obj = pod(dict(QUARTER))
    obj["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    _, result = mutated(obj, POD, example("kai"))
    assert result["metadata"]["labels"] == {"kai.scheduler/queue": "team-a"}
    assert "labels" not in record_of(result, POD)


@pytest.mark.parametrize(
    ("written", "given"), [("0.5", "0.5"), (".25", ".25"), ("500m", "0.5"), ("0.50", "0.50")]
)
def test_kai_gets_the_fraction_as_a_decimal_its_binder_parses(written: str, given: str) -> None:
    for obj in (pod(annotations={"gpu-fraction": written}), pod({"nvidia.com/gpu": written})):
        _, result = mutated(obj, POD, example("kai"))
        assert annotations_of(result)["gpu-fraction"] == given


def test_kai_validate_refuses_a_share_the_mutating_webhook_never_saw() -> None:
    assert rules(pod(dict(QUARTER)), example("kai"), "validate") == ["not-rewritten"]
    obj = pod(annotations={"gpu-fraction": "0.5"})
    assert rules(obj, example("kai"), "validate") == ["not-rewritten"]


# MIG ---------------------------------------------------------------------------------------

A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


@pytest.mark.parametrize(
    ("vram", "selector", "profile"),
    [
        ("4864Mi", A100, "1g.5gb"),
        ("4865Mi", A100, "1g.10gb"),
        ("9984Mi", A100, "1g.10gb"),
        ("19Gi", A100, "3g.20gb"),
        ("20Gi", A100, "7g.40gb"),
        ("10Gi", H100, "1g.20gb"),
        ("40Gi", H100, "7g.80gb"),
    ],
)
def test_mig_gives_the_smallest_profile_whose_instances_hold_the_share(
    vram: str, selector: dict[str, str], profile: str
) -> None:
    obj = with_selector(pod({"example.com/vram": vram}), selector)
    _, result = mutated(obj, POD, example("mig"))
    assert limits_of(result) == {f"nvidia.com/mig-{profile}": "1"}


def test_mig_denies_a_share_no_profile_holds_and_lists_them() -> None:
    obj = with_selector(pod({"example.com/vram": "40193Mi"}), A100)
    outcome = evaluate_pod(obj, POD, example("mig"), "mutate")
    assert [v.rule for v in outcome.violations] == ["no-mig-profile"]
    assert "7g.40gb (40192 MiB)" in outcome.violations[0].message
    on_a_t4 = with_selector(pod(dict(QUARTER)), T4)
    assert rules(on_a_t4, example("mig")) == ["no-mig-profile"]


def test_mig_a_pod_asking_for_a_mig_device_is_a_whole_gpu_pod() -> None:
    written = {"nvidia.com/mig-1g.5gb": "1"}
    _, result = mutated(pod(dict(written)), POD, example("mig"))
    assert limits_of(result) == written
    assert "annotations" not in result["metadata"]


# Headroom ----------------------------------------------------------------------------------


def test_reserved_memory_is_left_out_of_every_share() -> None:
    from dataclasses import replace

    policy = example("extended-resource")
    assert policy.sharing is not None
    t4 = replace(policy.sharing.models["Tesla-T4"], reserved_mib=448)
    models = {**policy.sharing.models, "Tesla-T4": t4}
    with_headroom = replace(policy, sharing=replace(policy.sharing, models=models))
    _, result = mutated(with_selector(pod(dict(QUARTER)), T4), POD, with_headroom)
    assert limits_of(result) == {"example.com/vram": str((15360 - 448) // 4)}
    too_much = with_selector(pod({"example.com/vram": "15000Mi"}), T4)
    assert rules(too_much, with_headroom) == ["share-too-large"]


def test_the_record_says_what_was_asked_what_it_became_and_the_policy() -> None:
    _, result = mutated(pod(dict(QUARTER)), POD, example("mig"))
    annotations = annotations_of(result)
    assert annotations["gpu-admission.example.com/policy"] == "mig"
    entry = json.loads(annotations["gpu-admission.example.com/shares"])["containers"]["infer"]
    assert entry["asked"] == "nvidia.com/gpu=0.25"
    assert entry["given"] == {"nvidia.com/mig-3g.20gb": "1"}


def test_a_time_slicing_replica_must_have_a_name_of_its_own(tmp_path: Path) -> None:
    text = (EXAMPLES / "time-slicing" / "policy.yaml").read_text()
    changed = text.replace(
        "sharedResource: nvidia.com/gpu.shared", "sharedResource: nvidia.com/gpu"
    )
    assert changed != text
    (tmp_path / "policy.yaml").write_text(changed)
    with pytest.raises(PolicyLoadError, match="renameByDefault"):
        load_policy_directory(tmp_path)


# Found in review: each case once went wrong --------------------------------------------------


def with_hami(**settings: Any) -> Policy:
    from dataclasses import replace

    policy = example("hami")
    assert policy.sharing is not None
    hami = replace(policy.sharing.hami, **settings)
    return replace(policy, sharing=replace(policy.sharing, hami=hami))


@pytest.mark.parametrize("product", ["NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4"])
@pytest.mark.parametrize("fraction", ["0.25", "0.33", "0.251", "0.07", "0.999"])
def test_hami_percent_is_stable_across_passes_and_the_env_stays_under_it(
    product: str, fraction: str
) -> None:
    policy = with_hami(memory="Percentage")
    obj = with_selector(deployment(pod({"nvidia.com/gpu": fraction})), None)
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    _, result = mutated(obj, DEPLOYMENT, policy)  # a second pass and /validate agree
    percent = int(limits_of(result, DEPLOYMENT)["nvidia.com/gpumem-percentage"])
    assert percent == int(Fraction(fraction) * 100)
    assert policy.sharing is not None
    card = policy.sharing.models[product].memory_mib
    cap = int(env_of(result, DEPLOYMENT)["CUPY_GPU_MEMORY_LIMIT"]) // 2**20
    assert cap + FRAMEWORK_HEADROOM_MIB <= card * percent // 100


def test_hami_keeps_the_cores_a_user_wrote_beside_a_share() -> None:
    written = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"}
    _, result = mutated(pod(dict(written)), POD, with_hami(cores=True))
    assert limits_of(result) == written


def test_kai_names_the_shares_container_over_one_the_pod_named() -> None:
    obj = two_containers(QUARTER, {})
    obj["metadata"]["annotations"] = {"gpu-fraction-container-name": "sidecar"}
    _, result = mutated(obj, POD, example("kai"))
    assert annotations_of(result)["gpu-fraction-container-name"] == "infer"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("kai", "hami"),
        ("hami", "kai"),
        ("kai", "gpushare"),
        ("gpushare", "hami"),
        ("time-slicing", "gpushare"),
        ("mig", "kai"),
    ],
)
def test_a_template_written_under_one_backend_is_rewritten_under_another(
    before: str, after: str
) -> None:
    _, written = mutated(deployment(pod(dict(QUARTER))), DEPLOYMENT, example(before))
    _, rewritten = mutated(written, DEPLOYMENT, example(after))
    _, fresh = mutated(deployment(pod(dict(QUARTER))), DEPLOYMENT, example(after))
    assert limits_of(rewritten, DEPLOYMENT) == limits_of(fresh, DEPLOYMENT)
    assert spec_of(rewritten, DEPLOYMENT).get("schedulerName") == spec_of(fresh, DEPLOYMENT).get(
        "schedulerName"
    )
    assert (
        spec_of(rewritten, DEPLOYMENT)["nodeSelector"] == spec_of(fresh, DEPLOYMENT)["nodeSelector"]
    )
    template = rewritten["spec"]["template"]["metadata"]
    assert template.get("labels", {}) == fresh["spec"]["template"]["metadata"].get("labels", {})


def test_a_recorded_share_is_read_back_in_the_policys_unit_of_now() -> None:
    from dataclasses import replace

    policy = example("time-slicing")
    assert policy.sharing is not None
    in_gib = replace(policy, sharing=replace(policy.sharing, unit="GiB"))
    _, written = mutated(deployment(pod(dict(QUARTER))), DEPLOYMENT, policy)
    _, again = mutated(written, DEPLOYMENT, in_gib)
    assert limits_of(again, DEPLOYMENT) == {"nvidia.com/gpu.shared": "1"}


def test_a_record_edited_by_hand_counts_as_none() -> None:
    _, written = mutated(pod(dict(QUARTER)), POD, example("time-slicing"))
    annotations = written["metadata"]["annotations"]
    record = json.loads(annotations["gpu-admission.example.com/shares"])
    record["containers"]["infer"]["mib"] = "²"
    annotations["gpu-admission.example.com/shares"] = json.dumps(record)
    outcome = evaluate_pod(written, POD, example("time-slicing"), "mutate")
    assert [v.rule for v in outcome.violations] == []


def test_mig_needs_the_whole_mig_family_governed(tmp_path: Path) -> None:
    text = (EXAMPLES / "mig" / "policy.yaml").read_text()
    (tmp_path / "policy.yaml").write_text(
        text.replace("nvidia.com/mig-*", "nvidia.com/mig-1g.10gb")
    )
    with pytest.raises(PolicyLoadError, match=r"govern nvidia\.com/mig-"):
        load_policy_directory(tmp_path)


def test_a_queue_label_is_judged_by_its_value_whatever_the_policys_backend() -> None:
    from webhook.engine.outcome_cache import OutcomeCache
    from webhook.engine.pod_spec import pod_parts

    _, written = mutated(deployment(pod(dict(QUARTER))), DEPLOYMENT, example("kai"))
    theirs = copy.deepcopy(written)
    theirs["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] = "team-b"
    cache = OutcomeCache()
    policy = example("time-slicing")
    for obj in (written, theirs):
        parts = pod_parts(obj, DEPLOYMENT)
        cached = cache.evaluate(obj, DEPLOYMENT, parts, policy, "mutate")
        fresh = evaluate_pod(obj, DEPLOYMENT, policy, "mutate")
        assert cached.operations == fresh.operations
    # The webhook's queue goes; the user's own stays.
    kept = jsonpatch_apply(theirs, evaluate_pod(theirs, DEPLOYMENT, policy, "mutate"))
    assert kept["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] == "team-b"


def jsonpatch_apply(obj: dict[str, Any], outcome: Any) -> dict[str, Any]:
    import jsonpatch

    return jsonpatch.apply_patch(obj, list(outcome.operations))
