"""GPU memory as a pod may ask for it: the VRAM resource written with a binary suffix, or KAI's
`gpu-memory` annotation in MiB. Each is given in the policy's unit or refused with what to
write instead, never rounded; and a GPU count written with a suffix is no count at all."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.support.engine_objects import mutated, pod
from tests.support.generated_pods import POD, POLICY
from webhook.engine.evaluate import evaluate_pod
from webhook.policy.model import Policy

assert POLICY.sharing is not None
IN_GIB = replace(POLICY, sharing=replace(POLICY.sharing, unit="GiB"))


def vram_given(obj: dict[str, Any], policy: Policy = POLICY) -> str:
    result = mutated(obj, POD, policy)[1]
    limits: dict[str, str] = result["spec"]["containers"][0]["resources"]["limits"]
    return limits["example.com/vram"]


def rules(obj: dict[str, Any], policy: Policy = POLICY) -> list[str]:
    outcome = evaluate_pod(obj, POD, policy, "mutate")
    return [violation.rule for violation in outcome.violations]


GIVEN = [
    ("4Gi in MiB", {"example.com/vram": "4Gi"}, None, POLICY, "4096"),
    ("4096Mi in MiB", {"example.com/vram": "4096Mi"}, None, POLICY, "4096"),
    ("4096Mi in GiB", {"example.com/vram": "4096Mi"}, None, IN_GIB, "4"),
    ("plain units stay", {"example.com/vram": "4096"}, None, POLICY, "4096"),
    ("gpu-memory in MiB", None, {"gpu-memory": "2048"}, POLICY, "2048"),
    ("gpu-memory in GiB", None, {"gpu-memory": "2048"}, IN_GIB, "2"),
    ("gpu-memory with leading zeros", None, {"gpu-memory": "01024"}, POLICY, "1024"),
]


@pytest.mark.parametrize(
    ("limits", "annotations", "policy", "given"),
    [case[1:] for case in GIVEN],
    ids=[case[0] for case in GIVEN],
)
def test_memory_is_given_in_the_policys_unit(
    limits: dict[str, str] | None,
    annotations: dict[str, str] | None,
    policy: Policy,
    given: str,
) -> None:
    assert vram_given(pod(limits, annotations=annotations), policy) == given


REFUSED = [
    ("not whole MiB", {"example.com/vram": "1.5Ki"}, None, POLICY, "whole-units"),
    ("not whole GiB", {"example.com/vram": "1500Mi"}, None, IN_GIB, "whole-units"),
    ("more than the card", {"example.com/vram": "20Gi"}, None, POLICY, "share-too-large"),
    ("gpu-memory not whole GiB", None, {"gpu-memory": "1500"}, IN_GIB, "whole-units"),
    ("gpu-memory zero", None, {"gpu-memory": "0"}, POLICY, "annotation-memory"),
    ("gpu-memory with a suffix", None, {"gpu-memory": "4Gi"}, POLICY, "annotation-memory"),
    ("gpu-memory negative", None, {"gpu-memory": "-1"}, POLICY, "annotation-memory"),
    ("gpu-memory in other digits", None, {"gpu-memory": "\u0664"}, POLICY, "annotation-memory"),
    (
        "both annotations",
        None,
        {"gpu-memory": "2048", "gpu-fraction": "0.5"},
        POLICY,
        "annotation-conflict",
    ),
    (
        "gpu-memory beside a fraction",
        {"nvidia.com/gpu": "250m"},
        {"gpu-memory": "2048"},
        POLICY,
        "annotation-conflict",
    ),
    (
        "memory beside a fraction",
        {"nvidia.com/gpu": "250m", "example.com/vram": "4Gi"},
        None,
        POLICY,
        "one-share-per-container",
    ),
    ("a count in Gi", {"nvidia.com/gpu": "1Gi"}, None, POLICY, "count-with-suffix"),
    ("a count in half Gi", {"nvidia.com/gpu": "0.5Gi"}, None, POLICY, "count-with-suffix"),
    ("a count in thousands", {"nvidia.com/gpu": "2k"}, None, POLICY, "count-with-suffix"),
    ("an unshared count in Gi", {"amd.com/gpu": "1Gi"}, None, POLICY, "count-with-suffix"),
]


@pytest.mark.parametrize(
    ("limits", "annotations", "policy", "rule"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_what_cannot_be_given_exactly_is_refused(
    limits: dict[str, str] | None,
    annotations: dict[str, str] | None,
    policy: Policy,
    rule: str,
) -> None:
    assert rules(pod(limits, annotations=annotations), policy) == [rule]


def test_a_count_with_a_suffix_is_told_the_vram_form() -> None:
    outcome = evaluate_pod(pod({"nvidia.com/gpu": "1Gi"}), POD, POLICY, "mutate")
    (violation,) = outcome.violations
    assert "for GPU memory write example.com/vram: 1Gi (given in MiB)" in violation.message
    # A decimal suffix is no memory amount on the VRAM resource either: the example is binary.
    thousands = evaluate_pod(pod({"nvidia.com/gpu": "2k"}), POD, POLICY, "mutate")
    assert "write example.com/vram: 4Gi (given in MiB)" in thousands.violations[0].message
    unshared = evaluate_pod(pod({"amd.com/gpu": "1Gi"}), POD, POLICY, "mutate")
    assert unshared.violations[0].message.endswith("ask for a whole number of GPUs")


def test_validate_refuses_memory_that_was_not_rewritten() -> None:
    outcome = evaluate_pod(pod({"example.com/vram": "4Gi"}), POD, POLICY, "validate")
    assert [v.rule for v in outcome.violations] == ["not-rewritten"]
    assert "an amount of memory that was not rewritten" in outcome.violations[0].message
