"""evaluate.py: one pod spec, one policy. The violations, or the patch that makes the pod
schedulable; and, when validating, what the stored object lacks of the same plan."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import jsonpatch
import pytest

from tests.unit.engine.builders import (
    GPU,
    POD,
    T4,
    VRAM,
    container,
    first_container,
    pod,
    policy,
    sharing,
    view,
)
from webhook.engine.backends.rendering import ClaimRendering, ContainerRendering, Rendering
from webhook.engine.env_plan import EnvChange
from webhook.engine.evaluate import PodOutcome, claim_templates, evaluate_pod, stored_violations
from webhook.engine.findings import ShareIntent, Violation
from webhook.engine.inventory import MigInventory
from webhook.engine.plan import PlannedShare, PodPlan
from webhook.engine.share_record import ShareRecord
from webhook.engine.shares import SizedShare
from webhook.policy.model import Policy

SHARED = policy(sharing())
CHECK = "check that the mutating webhook is registered for this object"


def evaluated(
    obj: dict[str, Any], mode: Any = "mutate", rules: Policy = SHARED, **options: Any
) -> PodOutcome:
    return evaluate_pod(obj, POD, rules, mode, **options)


def test_pod_outcome_defaults_to_a_pod_nothing_was_asked_of() -> None:
    outcome = PodOutcome()
    assert (outcome.violations, outcome.operations, outcome.document, outcome.warnings) == (
        (),
        (),
        None,
        (),
    )
    assert (outcome.rewritten, outcome.governed, outcome.model, outcome.companions) == (
        "",
        False,
        "",
        (),
    )


# evaluate_pod ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        pod(container("c")),
        pod(container("c", {"cpu": "1"})),
        pod(container("c", {"gpu.intel.com/i915": "1"})),
    ],
    ids=["no resources", "no GPU", "a GPU the policy does not govern"],
)
@pytest.mark.parametrize("mode", ["mutate", "validate"])
def test_evaluate_pod_looks_no_further_at_a_pod_that_asks_for_no_gpu(
    obj: dict[str, Any], mode: str
) -> None:
    assert evaluated(obj, mode) == PodOutcome()
    assert not PodOutcome().governed


def test_evaluate_pod_mutating_a_quarter_gives_a_patch_and_says_what_was_rewritten() -> None:
    obj = pod(container("c", {GPU: "0.25"}))
    outcome = evaluated(obj)
    assert outcome.violations == () and outcome.governed
    assert jsonpatch.apply_patch(obj, list(outcome.operations)) == outcome.document
    assert outcome.document is not None
    assert outcome.document["spec"]["containers"][0]["resources"] == {"limits": {VRAM: "3840"}}
    assert outcome.model == "Tesla-T4"
    assert outcome.rewritten == "c: nvidia.com/gpu=0.25 -> example.com/vram=3840 MiB of Tesla-T4"
    assert outcome.warnings[0] == (
        'container "c": nvidia.com/gpu=0.25 rewritten to example.com/vram=3840 MiB of Tesla-T4'
    )
    assert outcome.companions == ()


def test_evaluate_pod_says_each_rewrite_and_each_warning_on_one_line() -> None:
    obj = pod(container("a", {GPU: "0.25"}), container("x" * 60, {GPU: "0.25"}))
    outcome = evaluated(obj)
    assert outcome.rewritten == (
        "a: nvidia.com/gpu=0.25 -> example.com/vram=3840 MiB of Tesla-T4; "
        f"{'x' * 60}: nvidia.com/gpu=0.25 -> example.com/vram=3840 MiB of Tesla-T4"
    )
    long = f'container "{"x" * 60}": nvidia.com/gpu=0.25 rewritten to example.com/vram=3840'
    assert outcome.warnings[1] == long[:116] + "..."
    assert all(len(warning) <= 119 for warning in outcome.warnings)


def test_evaluate_pod_mutating_whole_gpus_rewrites_nothing_and_names_no_model() -> None:
    outcome = evaluated(pod(container("c", {GPU: "1"})))
    assert (outcome.violations, outcome.model, outcome.rewritten, outcome.governed) == (
        (),
        "",
        "",
        True,
    )
    assert [op["path"] for op in outcome.operations] == ["/spec/tolerations"]


@pytest.mark.parametrize("mode", ["mutate", "validate"])
def test_evaluate_pod_denies_a_pod_that_breaks_a_rule_in_either_mode(mode: str) -> None:
    outcome = evaluated(pod(container("c", {GPU: "1.5"})), mode)
    assert [v.rule for v in outcome.violations] == ["whole-number"]
    assert (outcome.operations, outcome.governed, outcome.document) == ((), True, None)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {GPU: "0.25"},
            'container "c": nvidia.com/gpu "0.25" is a fraction of a GPU that was not rewritten '
            f"into example.com/vram: {CHECK}",
        ),
        (
            {VRAM: "4Gi"},
            'container "c": example.com/vram "4Gi" is an amount of memory that was not rewritten '
            f"into example.com/vram: {CHECK}",
        ),
    ],
    ids=["a fraction", "an amount of memory"],
)
def test_evaluate_pod_validating_refuses_a_share_the_mutating_webhook_did_not_rewrite(
    limits: dict[str, str], message: str
) -> None:
    outcome = evaluated(pod(container("c", limits)), "validate")
    assert outcome.violations == (Violation("not-rewritten", message),)
    assert outcome.operations == ()


@pytest.mark.parametrize(
    "obj",
    [pod(container("c", {VRAM: "4096"})), pod(container("c", {GPU: "2"}))],
    ids=["VRAM written as the backend writes it", "whole GPUs"],
)
def test_evaluate_pod_validating_accepts_what_needs_no_rewrite(obj: dict[str, Any]) -> None:
    assert evaluated(obj, "validate") == PodOutcome(governed=True)


def test_evaluate_pod_validating_accepts_what_mutating_gave_and_a_second_pass_changes_nothing() -> (
    None
):
    obj = pod(container("c", {GPU: "0.25"}))
    result = jsonpatch.apply_patch(obj, list(evaluated(obj).operations))
    assert evaluated(result, "validate") == PodOutcome(governed=True)
    again = evaluated(result)
    assert (again.operations, again.violations, again.rewritten) == ((), (), "")
    # Nothing rewritten on the second pass: no model is named for it.
    assert again.model == ""


def test_evaluate_pod_reads_the_view_it_is_given() -> None:
    obj = pod(container("c", {GPU: "0.25"}))
    assert evaluated(obj, pod=view(obj)) == evaluated(obj)


def test_evaluate_pod_sizes_a_model_the_catalogue_lacks_from_the_inventory() -> None:
    obj = pod(container("c", {GPU: "0.5"}), nodeSelector={"nvidia.com/gpu.product": "Custom-GPU"})
    rules = policy(sharing(every_model=True))
    inventory = MigInventory(version=1, memory_by_product={"Custom-GPU": 24000})
    outcome = evaluated(obj, rules=rules, inventory=inventory)
    assert (outcome.model, outcome.rewritten) == (
        "Custom-GPU",
        "c: nvidia.com/gpu=0.5 -> example.com/vram=12000 MiB of Custom-GPU",
    )
    assert [v.rule for v in evaluated(obj, rules=rules).violations] == ["model-unknown"]


# claim_templates, stored_violations ----------------------------------------------------------


def planned_share(
    intent: ShareIntent,
    rendering: ContainerRendering,
    env: tuple[EnvChange, ...] = (),
) -> PlannedShare:
    sized = SizedShare(intent, T4, 3840, 3840)
    return PlannedShare(sized, rendering, env, intent.asked, sized)


def quarter_in(obj: dict[str, Any], index: int = 0, **fields: Any) -> ShareIntent:
    found = view(obj).containers[index]
    return ShareIntent(found, "quantity", GPU, "0.25", Fraction(1, 4), **fields)


def claim(name: str, template: str, body: dict[str, Any] | None = None) -> ContainerRendering:
    made = {"metadata": {"name": template}} if body is None else body
    return ContainerRendering({}, claim=ClaimRendering(name, template, made))


def test_claim_templates_gives_each_template_once_in_order() -> None:
    obj = pod(container("a"), container("b"), container("c"))
    shares = (
        planned_share(quarter_in(obj, 0), claim("a-gpu", "share-3840")),
        planned_share(quarter_in(obj, 1), claim("b-gpu", "share-7680")),
        planned_share(quarter_in(obj, 2), claim("c-gpu", "share-3840")),
    )
    plan = PodPlan(view(obj), SHARED, ShareRecord(), shares=shares)
    assert claim_templates(plan) == (
        {"metadata": {"name": "share-3840"}},
        {"metadata": {"name": "share-7680"}},
    )


def test_claim_templates_keeps_the_first_body_of_a_template_named_twice() -> None:
    obj = pod(container("a"), container("b"))
    first = {"metadata": {"name": "share-3840"}, "spec": {"first": True}}
    shares = (
        planned_share(quarter_in(obj, 0), claim("a-gpu", "share-3840", first)),
        planned_share(quarter_in(obj, 1), claim("b-gpu", "share-3840", {"spec": "second"})),
    )
    plan = PodPlan(view(obj), SHARED, ShareRecord(), shares=shares)
    assert claim_templates(plan) == (first,)


def test_claim_templates_of_shares_without_claims_are_none() -> None:
    obj = pod(container("c", {GPU: "0.25"}))
    share = planned_share(quarter_in(obj), ContainerRendering({VRAM: "3840"}))
    assert claim_templates(PodPlan(view(obj), SHARED, ShareRecord(), shares=(share,))) == ()


KAI_LIKE = Rendering(
    {"c": ContainerRendering({})},
    annotations={"gpu-fraction": "0.25"},
    default_labels={"kai.scheduler/queue": "default-queue"},
    scheduler_name="kai-scheduler",
)


def annotated(**spec: Any) -> dict[str, Any]:
    return pod(container("c"), annotations={"gpu-fraction": "0.25"}, **spec)


@pytest.mark.parametrize(
    ("obj", "lacks"),
    [
        (annotated(), "label kai.scheduler/queue, schedulerName kai-scheduler"),
        (
            pod(container("c"), annotations={"gpu-fraction": "0.5"}, schedulerName="kai-scheduler"),
            "annotation gpu-fraction=0.25, label kai.scheduler/queue",
        ),
    ],
    ids=["the label and the scheduler", "the annotation as planned and the label"],
)
def test_stored_violations_name_what_the_pod_lacks_of_the_backends_fields(
    obj: dict[str, Any], lacks: str
) -> None:
    intent = ShareIntent(
        first_container(obj), "annotation", GPU, "0.25", Fraction(1, 4), annotation="gpu-fraction"
    )
    share = planned_share(intent, ContainerRendering({}))
    plan = PodPlan(view(obj), SHARED, ShareRecord(), shares=(share,), rendering=KAI_LIKE)
    assert stored_violations(plan) == [
        Violation(
            "not-rewritten",
            f'the pod lacks {lacks}, which policy "pool" sets for its share of a GPU: {CHECK}',
        )
    ]


def test_stored_violations_of_a_pod_with_every_field_are_none() -> None:
    obj = annotated(schedulerName="kai-scheduler")
    obj["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    intent = ShareIntent(
        first_container(obj), "annotation", GPU, "0.25", Fraction(1, 4), annotation="gpu-fraction"
    )
    share = planned_share(intent, ContainerRendering({}))
    plan = PodPlan(view(obj), SHARED, ShareRecord(), shares=(share,), rendering=KAI_LIKE)
    assert stored_violations(plan) == []


@pytest.mark.parametrize(
    ("template", "recorded", "found"),
    [
        ("share-3840", True, []),
        (
            "share-3840",
            False,
            [
                Violation(
                    "not-rewritten",
                    'container "c": nvidia.com/gpu "0.25" is a fraction of a GPU that was not '
                    f"rewritten into resource claim c-gpu: {CHECK}",
                )
            ],
        ),
        (
            "theirs",
            True,
            [
                Violation(
                    "not-rewritten",
                    'container "c": nvidia.com/gpu "0.25" is a fraction of a GPU that was not '
                    f"rewritten into resource claim c-gpu: {CHECK}",
                )
            ],
        ),
    ],
    ids=[
        "the recorded claim from its template",
        "a fraction still in the resources",
        "a claim from another template",
    ],
)
def test_stored_violations_of_a_share_given_as_a_claim(
    template: str, recorded: bool, found: list[Violation]
) -> None:
    obj = pod(container("c", resources={"claims": [{"name": "c-gpu"}]}))
    obj["spec"]["resourceClaims"] = [{"name": "c-gpu", "resourceClaimTemplateName": template}]
    share = planned_share(quarter_in(obj, recorded=recorded), claim("c-gpu", "share-3840"))
    plan = PodPlan(view(obj), SHARED, ShareRecord(), shares=(share,), rendering=Rendering({}))
    assert stored_violations(plan) == found


@pytest.mark.parametrize(
    "rendering",
    [Rendering({}), KAI_LIKE],
    ids=["a backend of resources only", "not the fields of a backend the pod lacks as well"],
)
def test_stored_violations_name_an_enforced_variable_unset(rendering: Rendering) -> None:
    obj = pod(container("c", {VRAM: "3840"}))
    intent = ShareIntent(first_container(obj), "vram", VRAM, "3840", None, 3840)
    share = planned_share(
        intent, ContainerRendering({VRAM: "3840"}), (EnvChange("add", "A", "1", enforce=True),)
    )
    plan = PodPlan(view(obj), SHARED, ShareRecord(), shares=(share,), rendering=rendering)
    assert stored_violations(plan) == [
        Violation(
            "env-enforced",
            'container "c": env A is not set, but policy "pool" sets it to "1" for its share of '
            'the GPU: set it to "1"',
        )
    ]


@pytest.mark.parametrize(
    ("written", "requested", "found"),
    [
        ({VRAM: "3840"}, None, []),
        ({VRAM: "3840Mi"}, None, ["not-rewritten"]),
        ({VRAM: "4096"}, None, ["not-rewritten"]),
        ({VRAM: "3840"}, {VRAM: "3840"}, []),
        ({VRAM: "3840"}, {VRAM: "4096"}, ["not-rewritten"]),
    ],
    ids=[
        "as planned",
        "memory in bytes rather than units",
        "another amount",
        "requests as planned too",
        "requests of another amount",
    ],
)
def test_stored_violations_hold_the_resources_to_the_plan(
    written: dict[str, str], requested: dict[str, str] | None, found: list[str]
) -> None:
    obj = pod(container("c", written, requested))
    intent = ShareIntent(first_container(obj), "vram", VRAM, "3840", None, 3840)
    share = planned_share(intent, ContainerRendering({VRAM: "3840"}))
    plan = PodPlan(view(obj), SHARED, ShareRecord(), shares=(share,), rendering=Rendering({}))
    assert [v.rule for v in stored_violations(plan)] == found
