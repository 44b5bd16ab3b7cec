"""plan.py: the first pass over a pod. What its GPU requests mean under a policy (the shares,
the model, the size of each, the env), or every rule it breaks; it touches no patch."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from tests.unit.engine.builders import (
    GPU,
    T4,
    VRAM,
    container,
    first_container,
    pod,
    policy,
    sharing,
    view,
)
from webhook.engine.env_plan import EnvChange
from webhook.engine.findings import ShareIntent, Violation
from webhook.engine.gpu_model import ModelChoice
from webhook.engine.plan import PlannedShare, PodPlan, is_recorded, owns_runtime_class, plan_pod
from webhook.engine.share_record import ContainerShare, ShareRecord
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.model import EnvTemplate, Framework, Placement, Policy

SHARED = policy(sharing())
BY_DEFAULT = 'the default model of policy "pool"'
# What the webhook wrote for a quarter of a T4 before backends kept what they gave.
QUARTER_WRITTEN = ShareRecord(
    "Tesla-T4", True, {"c": ContainerShare("nvidia.com/gpu=0.25", "3840")}
)


def with_record(obj: dict[str, Any], record: ShareRecord) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {SHARES_ANNOTATION: record.encode()}
    return obj


def planned(obj: dict[str, Any], rules: Policy = SHARED) -> PodPlan:
    plan = plan_pod(view(obj), rules)
    assert isinstance(plan, PodPlan), plan
    return plan


def rules_broken(obj: dict[str, Any], rules: Policy = SHARED) -> list[Violation]:
    found = plan_pod(view(obj), rules)
    assert isinstance(found, list), found
    return found


# plan_pod: plans ------------------------------------------------------------------------------


def test_plan_pod_sizes_a_quarter_of_the_default_card_and_renders_it_as_vram() -> None:
    plan = planned(pod(container("c", {GPU: "0.25"})))
    (share,) = plan.shares
    assert (share.sized.units, share.sized.mib, share.sized.model) == (3840, 3840, T4)
    assert share.sized.intent.fraction == Fraction(1, 4)
    assert share.asked == "nvidia.com/gpu=0.25"
    assert share.granted is share.sized and share.limit_mib is None
    assert dict(share.rendering.resources) == {VRAM: "3840"}
    assert share.rendering.text == "example.com/vram=3840 MiB"
    assert plan.choice == ModelChoice(T4, True, BY_DEFAULT)
    assert (plan.whole, plan.stale, plan.gone_selector) == ((), (), ())


def test_plan_pod_plans_the_env_of_each_share() -> None:
    rules = policy(sharing(env=(EnvTemplate("SHARE_MIB", "{mib}"),)))
    (share,) = planned(pod(container("c", {GPU: "0.5"})), rules).shares
    assert share.env == (EnvChange("add", "SHARE_MIB", "7680"),)


@pytest.mark.parametrize(
    ("obj", "whole"),
    [
        (pod(container("c", {GPU: "2"})), [("c", GPU, 2)]),
        (
            pod(container("a", {GPU: "1"}), container("b", {"amd.com/gpu": "1"})),
            [("a", GPU, 1), ("b", "amd.com/gpu", 1)],
        ),
        (pod(container("c")), []),
    ],
    ids=["whole GPUs", "whole GPUs of two resources", "no GPU"],
)
def test_plan_pod_plans_whole_gpus_without_a_model(
    obj: dict[str, Any], whole: list[tuple[str, str, int]]
) -> None:
    plan = planned(obj)
    assert [(w.container.name, w.resource, w.count) for w in plan.whole] == whole
    assert (plan.shares, plan.choice, plan.rendering) == ((), None, None)


def test_plan_pod_of_a_policy_without_sharing_plans_whole_gpus() -> None:
    plan = planned(pod(container("c", {GPU: "1"})), policy())
    assert [w.count for w in plan.whole] == [1]


@pytest.mark.parametrize(
    ("limits", "share_units", "asked"),
    [
        ({VRAM: "3840"}, 3840, "nvidia.com/gpu=0.25"),
        ({GPU: "0.5", VRAM: "3840"}, 7680, "nvidia.com/gpu=0.5"),
        ({VRAM: "4096"}, 4096, "example.com/vram=4096"),
    ],
    ids=[
        "the webhook's own VRAM keeps what its user asked for",
        "a fresh fraction resizes the webhook's VRAM",
        "VRAM of another size is the user's own",
    ],
)
def test_plan_pod_tells_the_webhooks_earlier_share_from_a_fresh_one(
    limits: dict[str, str], share_units: int, asked: str
) -> None:
    (share,) = planned(with_record(pod(container("c", limits)), QUARTER_WRITTEN)).shares
    assert (share.sized.units, share.asked) == (share_units, asked)


def test_plan_pod_replaces_the_webhooks_earlier_share_with_whole_gpus() -> None:
    obj = with_record(pod(container("c", {GPU: "1", VRAM: "3840"})), QUARTER_WRITTEN)
    plan = planned(obj)
    assert [(w.resource, w.count) for w in plan.whole] == [(GPU, 1)]
    assert [(s.resource, s.vram_units) for s in plan.stale] == [(VRAM, 3840)]
    assert plan.shares == ()


def test_plan_pod_removes_the_selector_entries_the_webhook_set_for_a_share_gone() -> None:
    record = ShareRecord(
        "Tesla-T4",
        True,
        {"c": ContainerShare("nvidia.com/gpu=0.25", "3840")},
        node_selector={"pool": "shared"},
    )
    whole_elsewhere = policy(sharing(), whole_gpu=Placement(node_selector={"pool": "whole"}))
    obj = with_record(pod(container("c", {GPU: "1"}), nodeSelector={"pool": "shared"}), record)
    assert planned(obj).gone_selector == ("pool",)
    # Being removed, the entry is no conflict with the one whole GPUs want.
    assert planned(obj, whole_elsewhere).gone_selector == ("pool",)


# plan_pod: violations -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "rules", "violation"),
    [
        (
            pod(container("c", {GPU: "1", VRAM: "4096"})),
            SHARED,
            Violation(
                "mixed-gpu-pod",
                'container "c" takes whole GPUs (nvidia.com/gpu 1) and a share of one '
                "(example.com/vram 4096): a node shares its GPUs by memory or by card, never "
                "both, so keep one",
            ),
        ),
        (
            pod(container("a", {GPU: "1"}), container("b", {GPU: "0.5"})),
            SHARED,
            Violation(
                "mixed-gpu-pod",
                'container "a" takes whole GPUs (nvidia.com/gpu 1) and container "b" a share of '
                "one: a node shares its GPUs by memory or by card, never both, so split them into "
                "two pods",
            ),
        ),
        (
            pod(container("c", {GPU: "0.25", VRAM: "4096"})),
            SHARED,
            Violation(
                "one-share-per-container",
                'container "c" asks for several shares (nvidia.com/gpu 0.25, example.com/vram '
                "4096): keep one",
            ),
        ),
        (
            pod(container("c", {GPU: "0.25", VRAM: "4Gi"})),
            SHARED,
            Violation(
                "one-share-per-container",
                'container "c" asks for several shares (nvidia.com/gpu 0.25, example.com/vram '
                "4Gi): keep one",
            ),
        ),
        (
            pod(container("c", {VRAM: "1000"}), annotations={"gpu-fraction": "0.25"}),
            SHARED,
            Violation(
                "annotation-conflict",
                'container "c": annotation gpu-fraction=0.25 is 3840 MiB of a Tesla-T4, but the '
                "container asks for example.com/vram 1000: keep one of the two",
            ),
        ),
        (
            pod(container("a", {GPU: "0.6"}), container("b", {GPU: "0.6"})),
            SHARED,
            Violation(
                "shares-exceed-card",
                'the pod\'s shares add up to 18432 MiB at once (container "a" 9216 + container '
                '"b" 9216), more than a Tesla-T4 has (15360 MiB), and they must share one card: '
                "no node can ever hold the pod; ask for less in each container",
            ),
        ),
        (
            pod(container("c", {VRAM: "512"})),
            policy(sharing(frameworks=(Framework.JAX,))),
            Violation(
                "share-below-headroom",
                'container "c": example.com/vram=512 is 512 MiB, and a CUDA process needs 512 MiB '
                "of room before its framework takes any: ask for more than 512 MiB",
            ),
        ),
        (
            pod(container("c", {GPU: "0.25"}), runtimeClassName="runc"),
            policy(sharing(runtime_class_name="nvidia")),
            Violation(
                "runtime-class-conflict",
                'runtimeClassName "runc" conflicts with "nvidia" that policy "pool" for shared '
                'GPUs requires: write "nvidia", or remove it from the pod',
            ),
        ),
        (
            pod(container("c", {GPU: "0.25"}), nodeSelector={"pool": "cpu"}),
            policy(sharing(placement=Placement(node_selector={"pool": "gpu"}))),
            Violation(
                "node-selector-conflict",
                'nodeSelector pool="cpu" conflicts with pool="gpu" that policy "pool" for shared '
                "GPUs requires: remove it from the pod",
            ),
        ),
        (
            pod(container("c", {GPU: "1"}), nodeSelector={"pool": "cpu"}),
            policy(sharing(), whole_gpu=Placement(node_selector={"pool": "gpu"})),
            Violation(
                "node-selector-conflict",
                'nodeSelector pool="cpu" conflicts with pool="gpu" that policy "pool" for whole '
                "GPUs requires: remove it from the pod",
            ),
        ),
    ],
    ids=[
        "whole GPUs and a share in one container",
        "whole GPUs and a share in two containers",
        "a fraction and VRAM in one container",
        "a fraction and an amount of memory in one container",
        "VRAM beside an annotation that sizes otherwise",
        "shares that never fit their one card",
        "a share with no room beside the CUDA context",
        "a runtime class of the user's that is not the pool's",
        "a node selector against the pool's",
        "a node selector against the whole GPUs' one",
    ],
)
def test_plan_pod_refuses_a_pod_that_breaks_a_rule(
    obj: dict[str, Any], rules: Policy, violation: Violation
) -> None:
    assert rules_broken(obj, rules) == [violation]


@pytest.mark.parametrize(
    ("obj", "rules", "found"),
    [
        (
            pod(container("c", {GPU: "0.25"})),
            policy(sharing(default_model=None)),
            ["model-required"],
        ),
        (pod(container("c", {GPU: "0.00005"})), SHARED, ["share-too-small"]),
        (pod(container("c", {VRAM: "16000"})), SHARED, ["share-too-large"]),
        (
            pod(container("a", {GPU: "1.5"}), container("b", {GPU: "-1"})),
            SHARED,
            ["whole-number", "not-negative"],
        ),
    ],
    ids=[
        "no model to measure against",
        "a share below one unit",
        "a share above the card",
        "every rule of every container at once",
    ],
)
def test_plan_pod_returns_the_rules_of_each_step(
    obj: dict[str, Any], rules: Policy, found: list[str]
) -> None:
    assert [v.rule for v in rules_broken(obj, rules)] == found


def test_plan_pod_keeps_a_runtime_class_the_webhook_set_for_an_earlier_policy() -> None:
    record = ShareRecord(
        "Tesla-T4", True, {"c": ContainerShare("a", "3840")}, runtime_class_name="runc"
    )
    obj = with_record(pod(container("c", {GPU: "0.25"}), runtimeClassName="runc"), record)
    assert planned(obj, policy(sharing(runtime_class_name="nvidia"))).shares


def test_plan_pod_leaves_room_for_the_cuda_context_only_where_frameworks_are_told() -> None:
    assert planned(pod(container("c", {VRAM: "512"}))).shares
    assert planned(
        pod(container("c", {VRAM: "513"})), policy(sharing(frameworks=(Framework.JAX,)))
    ).shares


# PodPlan, PlannedShare -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        (pod(container("c", {GPU: "0.25"})), 'policy "pool" for shared GPUs'),
        (pod(container("c", {GPU: "1"})), 'policy "pool" for whole GPUs'),
    ],
    ids=["with shares", "with whole GPUs"],
)
def test_pod_plan_why_names_the_policy_and_the_kind_of_gpus(obj: dict[str, Any], why: str) -> None:
    assert planned(obj).why == why


def test_pod_plan_sharing_is_the_policys() -> None:
    assert planned(pod(container("c", {GPU: "0.25"}))).sharing is SHARED.sharing
    with pytest.raises(AssertionError):
        _ = planned(pod(container("c", {GPU: "1"})), policy()).sharing


def test_planned_share_container_is_the_intents() -> None:
    share: PlannedShare = planned(pod(container("x"), container("c", {GPU: "0.25"}))).shares[0]
    assert share.container is share.sized.intent.container
    assert share.container.label == 'container "c"'


# is_recorded, owns_runtime_class ------------------------------------------------------------------

C = first_container(pod(container("c", {VRAM: "3840"})))


@pytest.mark.parametrize(
    ("intent", "record", "recorded"),
    [
        (ShareIntent(C, "vram", VRAM, "1", None, 3840, recorded=True), ShareRecord(), True),
        (ShareIntent(C, "vram", VRAM, "3840", None, 3840), QUARTER_WRITTEN, True),
        (ShareIntent(C, "vram", VRAM, "4096", None, 4096), QUARTER_WRITTEN, False),
        (ShareIntent(C, "vram", VRAM, "3840", None, 3840), ShareRecord(), False),
        (ShareIntent(C, "memory", VRAM, "3840Mi", None, 3840), QUARTER_WRITTEN, False),
        (ShareIntent(C, "quantity", GPU, "0.25", Fraction(1, 4)), QUARTER_WRITTEN, False),
        (
            ShareIntent(C, "annotation", GPU, "0.5", Fraction(1, 2), annotation="gpu-fraction"),
            ShareRecord(annotations={"gpu-fraction": "0.5"}),
            True,
        ),
        (
            ShareIntent(C, "annotation", GPU, "0.25", Fraction(1, 4), annotation="gpu-fraction"),
            ShareRecord(annotations={"gpu-fraction": "0.5"}),
            False,
        ),
    ],
    ids=[
        "a share read back from the backend's resources",
        "VRAM of the recorded size",
        "VRAM of another size",
        "VRAM where nothing is recorded",
        "an amount of memory is always the user's",
        "a fraction is always the user's",
        "an annotation the backend wrote with this value",
        "an annotation of another value",
    ],
)
def test_is_recorded_tells_the_webhooks_share_from_its_users(
    intent: ShareIntent, record: ShareRecord, recorded: bool
) -> None:
    assert is_recorded(record, intent) is recorded


@pytest.mark.parametrize(
    ("present", "recorded", "owned"),
    [
        ("nvidia", "nvidia", True),
        ("runc", "nvidia", False),
        ("nvidia", None, False),
        (None, "nvidia", False),
        (None, None, False),
    ],
    ids=[
        "the one the webhook set",
        "the user's own since",
        "none recorded",
        "none in the pod",
        "none in the pod and none recorded",
    ],
)
def test_owns_runtime_class(present: str | None, recorded: str | None, owned: bool) -> None:
    spec = {} if present is None else {"runtimeClassName": present}
    record = ShareRecord(runtime_class_name=recorded)
    assert owns_runtime_class(view(pod(container("c"), **spec)), record) is owned
