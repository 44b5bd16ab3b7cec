"""From an admission request and the policies to a verdict: the one place that decides."""

from __future__ import annotations

from typing import Any

from webhook.admission.review import AdmissionRequest
from webhook.admission.verdict import Verdict
from webhook.engine.evaluate import Mode, evaluate_pod
from webhook.engine.pod_spec import MalformedObject
from webhook.engine.workloads import pod_template_location
from webhook.policy.policy_set import PolicySet

HANDLED_OPERATIONS = ("CREATE", "UPDATE")


def decide(request: AdmissionRequest, policies: PolicySet, mode: Mode) -> Verdict:
    # Operations, subresources and kinds without a pod spec pass before any policy work.
    if request.operation not in HANDLED_OPERATIONS or request.sub_resource:
        return Verdict.allow()
    location = pod_template_location(request.group, request.kind)
    if location is None:
        return Verdict.allow()
    if location.is_pod and request.operation == "UPDATE":
        # A pod's containers and resources cannot change after creation; judging them again
        # would only block label and status updates of pods admitted under older policies.
        return Verdict.allow()
    obj: Any = request.object
    if not isinstance(obj, dict):
        return Verdict.bad_object(f"request.object must be a {request.kind} object")
    policy = policies.governing(request.namespace, obj)
    try:
        outcome = evaluate_pod(obj, location, policy, mode)
    except MalformedObject as error:
        return Verdict.bad_object(f"{_describe(request)}: {error}")
    if not outcome.governed:
        return Verdict.allow()
    audit = {"policy": policy.name}
    if outcome.violations:
        message = "; ".join(violation.message for violation in outcome.violations)
        return Verdict.deny(f"{_describe(request)}: {message}", audit=audit)
    if outcome.rewritten:
        audit["rewritten"] = outcome.rewritten
    if outcome.operations:
        return Verdict.patched(outcome.operations, warnings=outcome.warnings, audit=audit)
    return Verdict.allow(warnings=outcome.warnings, audit=audit)


def _describe(request: AdmissionRequest) -> str:
    return f'{request.kind} "{request.name}"' if request.name else request.kind
