"""placement.py: the tolerations and nodeSelector entries GPU pods are given, merged into what
they have, and taken away where the webhook added them and nothing wants them now."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from tests.unit.engine.builders import container, pod, view
from webhook.engine.findings import Violation
from webhook.engine.patch import PatchRecorder
from webhook.engine.placement import (
    merge_node_selector,
    merge_tolerations,
    node_selector_conflicts,
    remove_tolerations,
    resource_toleration,
    runtime_class_conflict,
    stale_selector_keys,
    still_present_tolerations,
    wanted_tolerations,
)
from webhook.engine.pod_spec import MalformedObject
from webhook.policy.model import Placement

VRAM_TOLERATION = {"key": "example.com/vram", "operator": "Exists", "effect": "NoSchedule"}
POOL = {"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
TEAM = {"key": "team", "operator": "Exists"}
USER = {"key": "spot", "operator": "Exists", "effect": "NoExecute"}
WHY = 'policy "pool" for shared GPUs'


def placed(**spec: Any) -> dict[str, Any]:
    return pod(container("c"), **spec)


def patched(recorder: PatchRecorder, before: dict[str, Any]) -> dict[str, Any]:
    """The object the recorded patch gives, checked to be the recorder's document."""
    result = jsonpatch.apply_patch(before, recorder.operations)
    assert result == recorder.document
    return result


def test_resource_toleration_is_the_one_the_apiserver_plugin_adds() -> None:
    assert resource_toleration("example.com/vram") == VRAM_TOLERATION


@pytest.mark.parametrize(
    ("placement", "resources", "wanted"),
    [
        (Placement(), ["example.com/vram"], [VRAM_TOLERATION]),
        (
            Placement(tolerations=(USER,)),
            ["nvidia.com/gpu", "example.com/vram", "example.com/vram"],
            [
                VRAM_TOLERATION,
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                USER,
            ],
        ),
        (Placement(resource_tolerations=False, tolerations=(USER,)), ["example.com/vram"], [USER]),
        (Placement(resource_tolerations=False), ["example.com/vram"], []),
    ],
    ids=[
        "the resource's toleration",
        "each resource once, in order, then the policy's own",
        "the policy's own alone where resources are not tolerated",
        "none at all",
    ],
)
def test_wanted_tolerations(
    placement: Placement, resources: list[str], wanted: list[dict[str, Any]]
) -> None:
    assert wanted_tolerations(placement, resources) == wanted


@pytest.mark.parametrize(
    ("selector", "gone", "conflicts"),
    [
        (
            {"pool": "cpu"},
            (),
            [
                Violation(
                    "node-selector-conflict",
                    'nodeSelector pool="cpu" conflicts with pool="gpu" that policy "pool" for '
                    "shared GPUs requires: remove it from the pod",
                )
            ],
        ),
        ({"pool": "gpu"}, (), []),
        ({"zone": "a"}, (), []),
        ({"pool": "cpu"}, ("pool",), []),
    ],
    ids=[
        "another value for the key",
        "the same value",
        "another key",
        "an entry being removed does not count",
    ],
)
def test_node_selector_conflicts(
    selector: dict[str, str], gone: tuple[str, ...], conflicts: list[Violation]
) -> None:
    pod_view = view(placed(nodeSelector=selector))
    assert node_selector_conflicts(pod_view, {"pool": "gpu"}, WHY, gone) == conflicts


def test_runtime_class_conflict_says_what_to_write() -> None:
    assert runtime_class_conflict("runc", "nvidia", WHY) == Violation(
        "runtime-class-conflict",
        'runtimeClassName "runc" conflicts with "nvidia" that policy "pool" for shared GPUs '
        'requires: write "nvidia", or remove it from the pod',
    )


@pytest.mark.parametrize(
    ("spec", "gone", "added", "selector"),
    [
        ({}, (), {"pool": "gpu", "zone": "a"}, {"pool": "gpu", "zone": "a"}),
        (
            {"nodeSelector": {"pool": "cpu", "arch": "x86"}},
            (),
            {"zone": "a"},
            {"pool": "cpu", "arch": "x86", "zone": "a"},
        ),
        (
            {"nodeSelector": {"pool": "cpu"}},
            ("pool",),
            {"pool": "gpu", "zone": "a"},
            {"pool": "gpu", "zone": "a"},
        ),
    ],
    ids=[
        "every entry to a pod without a selector",
        "only the entries the pod lacks",
        "an entry being removed is written anew",
    ],
)
def test_merge_node_selector_adds_the_entries_the_pod_lacks(
    spec: dict[str, Any], gone: tuple[str, ...], added: dict[str, str], selector: dict[str, str]
) -> None:
    obj = placed(**spec)
    before = copy.deepcopy(obj)
    recorder = PatchRecorder(obj)
    found = merge_node_selector(recorder, view(obj), {"pool": "gpu", "zone": "a"}, gone)
    assert found == added
    assert patched(recorder, before)["spec"]["nodeSelector"] == selector


WANTED_POOL = {"key": "pool", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("present", "wanted", "added"),
    [
        ([], [VRAM_TOLERATION], [VRAM_TOLERATION]),
        ([{"operator": "Exists"}], [VRAM_TOLERATION], []),
        ([{"key": "example.com/vram", "operator": "Exists"}], [VRAM_TOLERATION], []),
        (
            [{"key": "example.com/vram", "operator": "Exists", "effect": "NoExecute"}],
            [VRAM_TOLERATION],
            [VRAM_TOLERATION],
        ),
        ([{"key": "other", "operator": "Exists"}], [VRAM_TOLERATION], [VRAM_TOLERATION]),
        (
            [{"operator": "Exists", "tolerationSeconds": 60}],
            [VRAM_TOLERATION],
            [VRAM_TOLERATION],
        ),
        ([VRAM_TOLERATION], [VRAM_TOLERATION], []),
        ([POOL], [WANTED_POOL], []),
        ([{"key": "pool", "operator": "Equal", "value": "gpu"}], [WANTED_POOL], []),
        ([{"key": "pool", "operator": "Exists"}], [WANTED_POOL], []),
        ([{"key": "pool", "operator": "Equal", "value": "cpu"}], [WANTED_POOL], [WANTED_POOL]),
        ([], [VRAM_TOLERATION, VRAM_TOLERATION], [VRAM_TOLERATION]),
    ],
    ids=[
        "to a pod without tolerations",
        "not where the pod tolerates every taint",
        "not where it tolerates the key with any effect",
        "where it tolerates the key with another effect only",
        "where it tolerates another key",
        "where its toleration ends after a time",
        "not where it has the same one",
        "not where it has the same one with the defaults written",
        "not where it tolerates the value with any effect",
        "not where it tolerates any value of the key",
        "where it tolerates another value",
        "once where it is wanted twice",
    ],
)
def test_merge_tolerations_adds_each_one_the_pod_does_not_already_tolerate(
    present: list[dict[str, Any]], wanted: list[dict[str, Any]], added: list[dict[str, Any]]
) -> None:
    obj = placed(tolerations=copy.deepcopy(present)) if present else placed()
    before = copy.deepcopy(obj)
    recorder = PatchRecorder(obj)
    assert merge_tolerations(recorder, view(obj), wanted) == added
    assert patched(recorder, before)["spec"].get("tolerations", []) == [*present, *added]


@pytest.mark.parametrize(
    ("present", "message"),
    [
        (["x"], "spec.tolerations[0]: a toleration must be an object"),
        ([USER, {"key": 5}], "spec.tolerations[1].key: must be a string"),
        (
            [{"key": "k", "tolerationSeconds": True}],
            "spec.tolerations[0].tolerationSeconds: must be a whole number",
        ),
        (
            [{"key": "k", "tolerationSeconds": 1.5}],
            "spec.tolerations[0].tolerationSeconds: must be a whole number",
        ),
    ],
    ids=[
        "a toleration that is no object",
        "a key that is no string",
        "seconds that are a boolean",
        "seconds that are not whole",
    ],
)
def test_merge_tolerations_refuses_a_malformed_toleration_by_its_field(
    present: list[Any], message: str
) -> None:
    obj = placed(tolerations=present)
    with pytest.raises(MalformedObject) as caught:
        merge_tolerations(PatchRecorder(obj), view(obj), [VRAM_TOLERATION])
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("present", "recorded", "wanted", "kept"),
    [
        ([POOL], [POOL, TEAM], [POOL, TEAM], [POOL]),
        ([POOL, TEAM], [POOL, TEAM], [TEAM], [TEAM]),
        ([{**POOL, "value": "cpu"}], [POOL], [POOL], []),
        ([{"key": "pool", "value": "gpu", "effect": "NoSchedule"}], [POOL], [POOL], [POOL]),
    ],
    ids=[
        "those still in the pod",
        "those still wanted",
        "not one the user edited",
        "one written with the defaults left out",
    ],
)
def test_still_present_tolerations_are_recorded_wanted_and_in_the_pod(
    present: list[Any], recorded: list[Any], wanted: list[Any], kept: list[Any]
) -> None:
    assert still_present_tolerations(view(placed(tolerations=present)), recorded, wanted) == kept


@pytest.mark.parametrize(
    ("present", "recorded", "wanted", "removed", "left"),
    [
        ([USER, POOL], [POOL], [], ["pool"], [USER]),
        ([POOL, USER, TEAM], [POOL, TEAM], [], ["pool", "team"], [USER]),
        ([POOL], [POOL], [POOL], [], [POOL]),
        ([{**POOL, "value": "cpu"}], [POOL], [], [], [{**POOL, "value": "cpu"}]),
        (
            [TEAM],
            [TEAM],
            [{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}],
            [],
            [TEAM],
        ),
        ([USER], [POOL], [], [], [USER]),
    ],
    ids=[
        "one the webhook added and nothing wants",
        "several, from the end so indices hold",
        "not one still wanted",
        "not one the user edited",
        "not one that tolerates a wanted taint",
        "never the user's own",
    ],
)
def test_remove_tolerations_takes_away_what_the_webhook_added_and_nothing_wants(
    present: list[Any], recorded: list[Any], wanted: list[Any], removed: list[str], left: list[Any]
) -> None:
    obj = placed(tolerations=copy.deepcopy(present))
    before = copy.deepcopy(obj)
    recorder = PatchRecorder(obj)
    assert remove_tolerations(recorder, view(obj), recorded, wanted) == removed
    assert patched(recorder, before)["spec"]["tolerations"] == left


@pytest.mark.parametrize(
    ("selector", "wanted", "stale"),
    [
        ({"pool": "gpu", "zone": "a"}, {}, ["pool", "zone"]),
        ({"pool": "gpu", "zone": "b"}, {}, ["pool"]),
        ({"pool": "gpu", "zone": "a"}, {"pool": "gpu"}, ["zone"]),
        ({"pool": "gpu", "zone": "a"}, {"pool": "shared"}, ["pool", "zone"]),
        ({}, {}, []),
    ],
    ids=[
        "every recorded entry nothing wants",
        "not one the user changed",
        "not one still wanted",
        "one wanted with another value",
        "none the pod no longer has",
    ],
)
def test_stale_selector_keys(
    selector: dict[str, str], wanted: dict[str, str], stale: list[str]
) -> None:
    recorded = {"pool": "gpu", "zone": "a"}
    assert stale_selector_keys(view(placed(nodeSelector=selector)), recorded, wanted) == stale
