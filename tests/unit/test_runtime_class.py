"""spec.sharing.runtimeClassName: a pod with a share runs under the policy's RuntimeClass.

The webhook sets it where the pod sets none, keeps an equal one, and denies another; its record
says whether it set it, so a container that turns to whole GPUs loses the runtimeClassName the
webhook gave and keeps the one its user wrote. Like every change, a second pass changes nothing,
/validate accepts what /mutate produced, and the outcome cache tells the pods apart."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.engine_objects import deployment, pod, record_of, spec_of
from tests.support.engine_objects import mutated as mutated_under
from tests.support.generated_pods import DEPLOYMENT, POD, POLICY, pods
from webhook.engine.evaluate import PodOutcome, evaluate_pod
from webhook.engine.outcome_cache import OutcomeCache
from webhook.engine.pod_spec import MalformedObject, engine_input, pod_parts
from webhook.engine.workloads import PodTemplateLocation
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.model import Placement, Policy

assert POLICY.sharing is not None


def runtime_policy(runtime_class: str | None = "nvidia", **placement: Any) -> Policy:
    """The shipped policy, named gpu-runtime, whose shared pods run under `runtime_class`."""
    assert POLICY.sharing is not None
    sharing = replace(POLICY.sharing, runtime_class_name=runtime_class)
    if placement:
        sharing = replace(sharing, placement=Placement(**placement))
    return replace(POLICY, name="gpu-runtime", sharing=sharing)


NVIDIA = runtime_policy("nvidia")


def mutated(
    obj: dict[str, Any], location: PodTemplateLocation = POD, policy: Policy = NVIDIA
) -> tuple[PodOutcome, dict[str, Any]]:
    return mutated_under(obj, location, policy)


# Pods -------------------------------------------------------------------------------------


QUARTER = {"nvidia.com/gpu": "250m"}
# The three forms of a share: each gets the sharing placement and env today.
SHARES = {
    "fraction": lambda **kw: pod(QUARTER, **kw),
    "gpu-fraction annotation": lambda **kw: pod(annotations={"gpu-fraction": "0.25"}, **kw),
    "vram asked directly": lambda **kw: pod({"example.com/vram": "3840"}, **kw),
}
LOCATIONS: dict[str, tuple[PodTemplateLocation, Any]] = {
    "pod": (POD, lambda obj: obj),
    "deployment": (DEPLOYMENT, deployment),
}


def runtime_class_operations(outcome: PodOutcome) -> list[dict[str, Any]]:
    return [op for op in outcome.operations if op["path"].endswith("/runtimeClassName")]


# A share gets the runtime class -------------------------------------------------------------


@pytest.mark.parametrize("where", LOCATIONS)
@pytest.mark.parametrize("share", SHARES)
def test_a_share_is_given_the_runtime_class_when_the_pod_sets_none(share: str, where: str) -> None:
    location, wrap = LOCATIONS[where]
    outcome, result = mutated(wrap(SHARES[share]()), location)
    assert spec_of(result, location)["runtimeClassName"] == "nvidia"
    assert record_of(result, location)["runtimeClassName"] == "nvidia"
    assert any('runtimeClassName set to "nvidia"' in warning for warning in outcome.warnings)


@pytest.mark.parametrize("where", LOCATIONS)
@pytest.mark.parametrize("share", SHARES)
def test_a_share_that_sets_the_same_runtime_class_keeps_it_as_its_own(
    share: str, where: str
) -> None:
    location, wrap = LOCATIONS[where]
    outcome, result = mutated(wrap(SHARES[share](runtime_class="nvidia")), location)
    assert runtime_class_operations(outcome) == []
    assert spec_of(result, location)["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in record_of(result, location)
    assert not any("runtimeClassName" in warning for warning in outcome.warnings)


@pytest.mark.parametrize("where", LOCATIONS)
@pytest.mark.parametrize("share", SHARES)
def test_a_share_under_another_runtime_class_is_denied(share: str, where: str) -> None:
    location, wrap = LOCATIONS[where]
    outcome = evaluate_pod(wrap(SHARES[share](runtime_class="kata")), location, NVIDIA, "mutate")
    assert [v.rule for v in outcome.violations] == ["runtime-class-conflict"]
    assert outcome.operations == ()
    assert outcome.violations[0].message == (
        'runtimeClassName "kata" conflicts with "nvidia" that policy "gpu-runtime" for shared '
        'GPUs requires: write "nvidia", or remove it from the pod'
    )


@pytest.mark.parametrize(
    "obj",
    [pod({"nvidia.com/gpu": "1"}), pod({"nvidia.com/gpu": "1"}, runtime_class="kata")],
    ids=["whole GPU", "whole GPU under another runtime class"],
)
def test_whole_gpus_are_not_given_the_runtime_class_of_shares(obj: dict[str, Any]) -> None:
    before = spec_of(obj, POD).get("runtimeClassName")
    outcome, result = mutated(obj)
    assert runtime_class_operations(outcome) == []
    assert spec_of(result, POD).get("runtimeClassName") == before


def test_a_policy_without_a_runtime_class_leaves_the_pods_alone() -> None:
    for runtime_class in (None, "kata"):
        outcome, result = mutated(pod(QUARTER, runtime_class=runtime_class), POD, POLICY)
        assert runtime_class_operations(outcome) == []
        assert "runtimeClassName" not in record_of(result, POD)


# Later passes: the record tells the webhook's runtime class from the user's ----------------


def stored(runtime_class: str | None, policy: Policy = NVIDIA) -> dict[str, Any]:
    """A Deployment with a quarter share, as stored after /mutate."""
    return mutated(deployment(pod(QUARTER, runtime_class=runtime_class)), DEPLOYMENT, policy)[1]


def edited(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`obj` with its template's runtimeClassName (None: removed) or first container's GPU
    limit changed, as a later UPDATE sends it."""
    changed = copy.deepcopy(obj)
    spec = spec_of(changed, DEPLOYMENT)
    if "runtime_class" in changes:
        spec.pop("runtimeClassName", None)
        if changes["runtime_class"] is not None:
            spec["runtimeClassName"] = changes["runtime_class"]
    if "gpu" in changes:
        spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = changes["gpu"]
    return changed


# (id, stored: the pod's own runtimeClassName at create, the UPDATE's changes, the policy
#  then, the runtimeClassName after /mutate or the rule of the denial, recorded as set by us)
LATER_PASSES = [
    ("set by us, applied again", None, {"gpu": "250m"}, NVIDIA, "nvidia", True),
    ("set by us, share changed", None, {"gpu": "500m"}, NVIDIA, "nvidia", True),
    ("the user's, share changed", "nvidia", {"gpu": "500m"}, NVIDIA, "nvidia", False),
    ("set by us, whole GPU now", None, {"gpu": "1"}, NVIDIA, None, False),
    ("the user's, whole GPU now", "nvidia", {"gpu": "1"}, NVIDIA, "nvidia", False),
    (
        "set by us then changed by the user, whole GPU now",
        None,
        {"gpu": "1", "runtime_class": "nvidia-cdi"},
        NVIDIA,
        "nvidia-cdi",
        False,
    ),
    (
        "set by us then changed by the user, a share still",
        None,
        {"runtime_class": "kata"},
        NVIDIA,
        "runtime-class-conflict",
        False,
    ),
    (
        "set by us, the policy now names another",
        None,
        {"gpu": "500m"},
        runtime_policy("nvidia-cdi"),
        "nvidia-cdi",
        True,
    ),
    (
        "set by us, the policy now names none",
        None,
        {"gpu": "500m"},
        runtime_policy(None),
        None,
        False,
    ),
    (
        "the user's, the policy now names none",
        "nvidia",
        {"gpu": "500m"},
        runtime_policy(None),
        "nvidia",
        False,
    ),
]


@pytest.mark.parametrize(
    ("at_create", "changes", "policy", "after", "ours"),
    [case[1:] for case in LATER_PASSES],
    ids=[case[0] for case in LATER_PASSES],
)
def test_a_later_update_changes_only_the_runtime_class_the_webhook_set(
    at_create: str | None,
    changes: dict[str, Any],
    policy: Policy,
    after: str | None,
    ours: bool,
) -> None:
    update = edited(stored(at_create), **changes)
    if after == "runtime-class-conflict":
        outcome = evaluate_pod(update, DEPLOYMENT, policy, "mutate")
        assert [v.rule for v in outcome.violations] == [after]
        return
    _, result = mutated(update, DEPLOYMENT, policy)
    spec = spec_of(result, DEPLOYMENT)
    assert spec.get("runtimeClassName") == after
    annotations = result["spec"]["template"]["metadata"].get("annotations", {})
    if SHARES_ANNOTATION in annotations:
        recorded = json.loads(annotations[SHARES_ANNOTATION]).get("runtimeClassName")
        assert recorded == (after if ours else None)
    else:
        assert not ours and "example.com/vram" not in spec["containers"][0]["resources"]["limits"]


def test_a_pod_created_from_a_rewritten_template_keeps_the_runtime_class_without_a_patch() -> None:
    template = stored(None)["spec"]["template"]
    created = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(template)}
    created["metadata"]["name"] = "d-7d9f-x2"
    outcome = evaluate_pod(created, POD, NVIDIA, "mutate")
    assert outcome.violations == () and outcome.operations == ()
    assert evaluate_pod(created, POD, NVIDIA, "validate").violations == ()


# /validate ---------------------------------------------------------------------------------


POOL = runtime_policy("nvidia", node_selector=MappingProxyType({"pool": "shared"}))
VRAM = {"example.com/vram": "3840"}
# The same placement problem written two ways: /validate must judge them alike.
PLACEMENT_PAIRS = [
    ("absent", pod(VRAM), pod(VRAM)),
    (
        "as the policy says",
        pod(VRAM, runtime_class="nvidia"),
        {**pod(VRAM), "spec": {**pod(VRAM)["spec"], "nodeSelector": {"pool": "shared"}}},
    ),
    (
        "another value",
        pod(VRAM, runtime_class="kata"),
        {**pod(VRAM), "spec": {**pod(VRAM)["spec"], "nodeSelector": {"pool": "whole"}}},
    ),
]


@pytest.mark.parametrize(
    ("by_runtime_class", "by_node_selector"),
    [case[1:] for case in PLACEMENT_PAIRS],
    ids=[case[0] for case in PLACEMENT_PAIRS],
)
def test_validate_judges_the_runtime_class_as_it_judges_the_placement_node_selector(
    by_runtime_class: dict[str, Any], by_node_selector: dict[str, Any]
) -> None:
    judged = {
        mode: [evaluate_pod(obj, POD, POOL, mode) for obj in (by_runtime_class, by_node_selector)]
        for mode in ("mutate", "validate")
    }
    mutate_rules = [sorted(v.rule for v in outcome.violations) for outcome in judged["mutate"]]
    assert [bool(rules) for rules in mutate_rules] == [bool(mutate_rules[1])] * 2
    validated = judged["validate"]
    validate_rules = [sorted(v.rule for v in outcome.violations) for outcome in validated]
    assert validate_rules == mutate_rules
    assert validated[0].operations == validated[1].operations == ()


def test_validate_accepts_what_mutate_produced_under_the_runtime_class() -> None:
    for share in SHARES.values():
        for location, wrap in LOCATIONS.values():
            _, result = mutated(wrap(share()), location)
            outcome = evaluate_pod(result, location, NVIDIA, "validate")
            assert outcome.violations == () and outcome.operations == ()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods(), st.sampled_from([None, "nvidia", "kata"]))
def test_any_pod_under_a_runtime_class_policy_mutates_once_and_validates(
    generated: dict[str, Any], runtime_class: str | None
) -> None:
    if runtime_class is not None:
        generated["spec"]["runtimeClassName"] = runtime_class
    before = copy.deepcopy(generated)
    outcome = evaluate_pod(generated, POD, NVIDIA, "mutate")
    assert generated == before, "the engine must not change its input"
    if outcome.violations:
        return
    result = jsonpatch.apply_patch(before, list(outcome.operations))
    shares = SHARES_ANNOTATION in result["metadata"].get("annotations", {})
    if shares:
        assert result["spec"]["runtimeClassName"] == (runtime_class or "nvidia")
    else:
        assert result["spec"].get("runtimeClassName") == runtime_class
    again = evaluate_pod(result, POD, NVIDIA, "mutate")
    assert again.violations == () and again.operations == ()
    assert evaluate_pod(result, POD, NVIDIA, "validate").violations == ()


# The outcome cache ---------------------------------------------------------------------------


RUNTIME_CLASSES = [None, "nvidia", "kata", "nvidia-cdi"]


@pytest.mark.parametrize("where", LOCATIONS)
def test_the_outcome_cache_tells_pods_apart_by_their_runtime_class(where: str) -> None:
    location, wrap = LOCATIONS[where]
    variants = [wrap(pod(QUARTER, runtime_class=value)) for value in RUNTIME_CLASSES]
    keys = {engine_input(location, pod_parts(obj, location)) for obj in variants}
    assert len(keys) == len(variants)
    cache = OutcomeCache()
    for obj in variants:
        cached = cache.evaluate(obj, location, pod_parts(obj, location), NVIDIA, "mutate")
        assert cached == replace(evaluate_pod(obj, location, NVIDIA, "mutate"), document=None)
    assert len(cache) == len(variants)


@pytest.mark.parametrize("value", [7, ["nvidia"], {"name": "nvidia"}])
def test_a_runtime_class_that_is_no_string_is_refused_after_a_sibling_without_one(
    value: Any,
) -> None:
    sibling = pod(QUARTER)
    odd = pod(QUARTER)
    odd["spec"]["runtimeClassName"] = value
    cache = OutcomeCache()
    cache.evaluate(sibling, POD, pod_parts(sibling, POD), NVIDIA, "mutate")
    with pytest.raises(MalformedObject, match=r"spec\.runtimeClassName: must be a string"):
        cache.evaluate(odd, POD, pod_parts(odd, POD), NVIDIA, "mutate")
