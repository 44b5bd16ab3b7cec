"""Enforce, Warn and Audit: what a broken rule does under each, while rewrites go on."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.support.engine_objects import pod, pod_request
from tests.support.generated_pods import POLICY
from webhook.admission.decide import decide
from webhook.policy.model import Enforcement
from webhook.policy.policy_set import PolicySet
from webhook.server.admission_log import verdict_name


def judged(enforcement: Enforcement, limits: dict[str, str]) -> Any:
    policies = PolicySet((replace(POLICY, enforcement=enforcement),))
    return decide(pod_request(pod(limits)), policies, "mutate")


BROKEN = {"nvidia.com/gpu": "1.5"}
DENIAL = 'Pod "p": container "infer": nvidia.com/gpu "1.5" is not a whole number'


def test_enforce_denies() -> None:
    verdict = judged(Enforcement.ENFORCE, BROKEN)
    assert not verdict.allowed and verdict.message.startswith(DENIAL)
    assert verdict_name(verdict) == "denied"


@pytest.mark.parametrize(
    ("enforcement", "name", "warned"),
    [(Enforcement.WARN, "warned", True), (Enforcement.AUDIT, "audited", False)],
)
def test_warn_and_audit_allow_the_object_as_it_is_and_record_the_denial(
    enforcement: Enforcement, name: str, warned: bool
) -> None:
    verdict = judged(enforcement, BROKEN)
    assert verdict.allowed and not verdict.patch
    audit = verdict.audit_annotations
    assert audit["policy"] == "default" and audit["enforcement"] == enforcement.value
    assert audit["would-deny"].startswith(DENIAL)
    kubectl_says = [w for w in verdict.warnings if "would deny this" in w]
    assert bool(kubectl_says) is warned
    if warned:
        assert kubectl_says[0].startswith(
            f'policy "default" ({enforcement.value}) would deny this: '
        )
    assert verdict_name(verdict) == name


@pytest.mark.parametrize("enforcement", list(Enforcement))
def test_rewrites_are_made_in_every_mode(enforcement: Enforcement) -> None:
    verdict = judged(enforcement, {"nvidia.com/gpu": "0.25"})
    assert verdict.allowed and verdict.patch
    assert "would-deny" not in verdict.audit_annotations
    assert verdict_name(verdict) == "patched"
