"""render.py: the second pass, when mutating. A plan written into the patch as merges that
leave what is right alone, what the webhook wrote before and no longer wants taken away, and
the record of it all."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest

from tests.unit.engine.builders import (
    DEPLOYMENT,
    GPU,
    MODEL_LABEL,
    POD,
    VRAM,
    container,
    deployment,
    pod,
    policy,
    sharing,
    view,
)
from webhook.engine.patch import PatchRecorder
from webhook.engine.plan import PodPlan, plan_pod
from webhook.engine.pod_spec import MAX_ANNOTATION_BYTES, MalformedObject, annotation_bytes
from webhook.engine.render import Rendered, render_plan, unenforced_warning
from webhook.engine.workloads import PodTemplateLocation
from webhook.policy.defaults import POLICY_ANNOTATION, SHARES_ANNOTATION
from webhook.policy.model import Backend, Framework, HamiSettings, HardLimit, Policy

SHARED = policy(sharing())
VRAM_TOLERATION = {"key": VRAM, "operator": "Exists", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
QUARTER_RECORD = (
    '{"model":"Tesla-T4","pinned":true,"containers":{"c":{"asked":"nvidia.com/gpu=0.25",'
    '"vram":"3840","env":[]}},"hardLimit":"None"}'
)
UNENFORCED = "GPU memory shares are not enforced on these nodes: no framework is told its limit"


def rendered(
    obj: dict[str, Any], rules: Policy = SHARED, location: PodTemplateLocation = POD
) -> tuple[Rendered, dict[str, Any], list[Any]]:
    """What render_plan says, the object its patch gives (checked against the recorder's
    document, and the original checked untouched), and the operations."""
    before = copy.deepcopy(obj)
    plan = plan_pod(view(obj, location), rules)
    assert isinstance(plan, PodPlan), plan
    recorder = PatchRecorder(obj)
    said = render_plan(plan, recorder)
    assert obj == before
    result = jsonpatch.apply_patch(before, recorder.operations)
    assert result == recorder.document
    return said, result, recorder.operations


def test_render_plan_rewrites_a_quarter_into_vram_pins_the_model_and_records_it() -> None:
    said, result, _ = rendered(pod(container("c", {GPU: "0.25"})))
    assert result == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "annotations": {POLICY_ANNOTATION: "pool", SHARES_ANNOTATION: QUARTER_RECORD},
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "cuda:12", "resources": {"limits": {VRAM: "3840"}}}
            ],
            "nodeSelector": {MODEL_LABEL: "Tesla-T4"},
            "tolerations": [VRAM_TOLERATION],
        },
    }
    assert said.rewrites == ["c: nvidia.com/gpu=0.25 -> example.com/vram=3840 MiB of Tesla-T4"]
    assert said.warnings == [
        'container "c": nvidia.com/gpu=0.25 rewritten to example.com/vram=3840 MiB of Tesla-T4',
        'pinned to nvidia.com/gpu.product=Tesla-T4, the default model of policy "pool"',
        UNENFORCED,
    ]


def test_render_plan_changes_nothing_on_a_second_pass() -> None:
    _, once, _ = rendered(pod(container("c", {GPU: "0.25"})))
    said, twice, operations = rendered(once)
    assert (operations, twice) == ([], once)
    assert (said.rewrites, said.warnings) == ([], [])


@pytest.mark.parametrize(
    ("obj", "resources"),
    [
        (
            pod(container("c", {GPU: "0.25"}, {GPU: "0.25"})),
            {"limits": {VRAM: "3840"}, "requests": {VRAM: "3840"}},
        ),
        (
            pod(container("c", {GPU: "0.25", "cpu": "1"})),
            {"limits": {"cpu": "1", VRAM: "3840"}},
        ),
        (
            pod(container("c"), annotations={"gpu-fraction": "0.25"}),
            {"limits": {VRAM: "3840"}, "requests": {VRAM: "3840"}},
        ),
    ],
    ids=[
        "requests are given where there were some",
        "the container's other resources stay",
        "a pod's annotated share is given in requests too, as the apiserver would default them",
    ],
)
def test_render_plan_gives_the_container_the_resources_of_its_share(
    obj: dict[str, Any], resources: dict[str, Any]
) -> None:
    _, result, _ = rendered(obj)
    assert result["spec"]["containers"][0]["resources"] == resources


def test_render_plan_gives_a_templates_annotated_share_in_limits_only() -> None:
    obj = deployment(pod(container("c"), annotations={"gpu-fraction": "0.25"}))
    _, result, _ = rendered(obj, location=DEPLOYMENT)
    template = result["spec"]["template"]["spec"]
    assert template["containers"][0]["resources"] == {"limits": {VRAM: "3840"}}


def test_render_plan_gives_whole_gpus_their_toleration_and_nothing_else() -> None:
    said, result, _ = rendered(pod(container("c", {GPU: "1"})))
    assert result["spec"]["tolerations"] == [GPU_TOLERATION]
    assert "annotations" not in result["metadata"] and "nodeSelector" not in result["spec"]
    assert (said.rewrites, said.warnings) == ([], [])


def test_render_plan_takes_away_the_webhooks_share_when_whole_gpus_replace_it() -> None:
    _, shared, _ = rendered(pod(container("c", {GPU: "0.25"})))
    shared["spec"]["containers"][0]["resources"]["limits"][GPU] = "1"
    said, result, _ = rendered(shared)
    assert result["spec"]["containers"][0]["resources"] == {"limits": {GPU: "1"}}
    assert result["spec"]["tolerations"] == [GPU_TOLERATION]
    assert MODEL_LABEL not in result["spec"].get("nodeSelector", {})
    assert result["metadata"].get("annotations", {}) == {}
    assert said.warnings == ['container "c": whole GPUs replace its earlier share']
    assert said.rewrites == []


@pytest.mark.parametrize(
    ("changes", "warning", "recorded"),
    [
        (
            {"runtime_class_name": "nvidia"},
            'runtimeClassName set to "nvidia", which policy "pool" for shared GPUs requires',
            {"runtimeClassName": "nvidia", "hardLimit": "None"},
        ),
        ({"hard_limit": HardLimit.MPS}, None, {"hardLimit": "MPS"}),
    ],
    ids=["a runtime class the pool needs", "shares a hard limit holds are not said unenforced"],
)
def test_render_plan_sets_what_the_pool_needs_and_says_so(
    changes: dict[str, Any], warning: str | None, recorded: dict[str, Any]
) -> None:
    said, result, _ = rendered(pod(container("c", {GPU: "0.25"})), policy(sharing(**changes)))
    record = json.loads(result["metadata"]["annotations"][SHARES_ANNOTATION])
    assert {key: record[key] for key in recorded} == recorded
    if warning is not None:
        assert warning in said.warnings
        assert result["spec"]["runtimeClassName"] == "nvidia"
    assert (UNENFORCED in said.warnings) is (changes.get("hard_limit") is None)


def test_render_plan_refuses_a_record_that_would_break_the_apiservers_annotation_limit() -> None:
    obj = pod(container("c", {GPU: "0.25"}), annotations={"big": "x" * (256 * 1024 - 100)})
    plan = plan_pod(view(obj), SHARED)
    assert isinstance(plan, PodPlan)
    with pytest.raises(MalformedObject) as caught:
        render_plan(plan, PatchRecorder(obj))
    assert str(caught.value) == (
        "metadata.annotations: Too long: must have at most 262144 bytes with the "
        "gpu-admission.example.com/policy and gpu-admission.example.com/shares annotations a "
        "share adds"
    )


def test_render_plan_admits_a_record_that_fills_the_annotation_limit_exactly() -> None:
    _, once, _ = rendered(pod(container("c", {GPU: "0.25"}), annotations={"big": ""}))
    padding = MAX_ANNOTATION_BYTES - annotation_bytes(once["metadata"]["annotations"])
    obj = pod(container("c", {GPU: "0.25"}), annotations={"big": "x" * padding})
    _, result, _ = rendered(obj)
    assert annotation_bytes(result["metadata"]["annotations"]) == MAX_ANNOTATION_BYTES


def test_render_plan_gives_the_hami_scheduler_in_place_of_the_default_one() -> None:
    hami = sharing(backend=Backend.HAMI, hami=HamiSettings(scheduler_name="hami-scheduler"))
    obj = pod(container("c", {GPU: "0.25"}), schedulerName="default-scheduler")
    said, result, _ = rendered(obj, policy(hami))
    assert result["spec"]["schedulerName"] == "hami-scheduler"
    assert (
        'schedulerName set to "hami-scheduler", which policy "pool" for shared GPUs requires'
        in said.warnings
    )


def test_rendered_starts_with_nothing_said() -> None:
    assert (Rendered().warnings, Rendered().rewrites) == ([], [])


@pytest.mark.parametrize(
    ("frameworks", "warning"),
    [
        ((), UNENFORCED),
        (
            (Framework.JAX, Framework.CUPY, Framework.TENSORFLOW),
            "GPU memory shares are not enforced on these nodes: only JAX, CuPy are told their "
            "limit",
        ),
        ((Framework.TENSORFLOW,), UNENFORCED),
    ],
    ids=[
        "no framework told",
        "the frameworks whose variable limits them",
        "TensorFlow's variable is no limit",
    ],
)
def test_unenforced_warning_names_the_frameworks_told_their_limit(
    frameworks: tuple[Framework, ...], warning: str
) -> None:
    assert unenforced_warning(sharing(frameworks=frameworks)) == warning
