"""Our output through another mutating webhook and back through us converges, without a loop.

With `reinvocationPolicy: IfNeeded` the apiserver calls the webhook again after a later webhook
changed the object, once. Here a simulated second webhook, idempotent as real ones are, adds a
sidecar that asks for a GPU fraction, sorts the first container's env and adds a toleration;
the object then goes through us again, and so on. The rounds must reach an object that neither
changes, within a few rounds: the apiserver's single reinvocation must be enough.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from webhook.admission.answer import judge
from webhook.admission.review import decode_envelope
from webhook.engine.workloads import pod_template_location
from webhook.policy.namespace_labels import NoCluster
from webhook.policy.policy_set import PolicySet

REPO_ROOT = Path(__file__).resolve().parents[1]
SHIPPED = REPO_ROOT / "tests" / "scenarios" / "shipped"
POLICIES = PolicySet.load(REPO_ROOT / "policies")
REVIEWS = [
    "01-create-pod-frac-quarter",
    "03-create-pod-kai-style",
    "04-create-pod-sidecar-and-init",
    "05-create-deployment-llm-serve",
    "08-create-job-batch-infer",
]
SIDECAR = {
    "name": "profiler",
    "image": "registry.example.com/gpu-profiler:1",
    "resources": {"limits": {"nvidia.com/gpu": "250m"}},
    "env": [{"name": "B_LEVEL", "value": "2"}, {"name": "A_MODE", "value": "sample"}],
}
TOLERATION = {"key": "example.com/profiling", "operator": "Exists", "effect": "NoSchedule"}
MAX_ROUNDS = 3


def ours(review: dict[str, Any], obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The object after our /mutate, and whether we patched it."""
    request = {**review["request"], "object": obj}
    body = json.dumps({**review, "request": request}).encode()
    verdict = judge(decode_envelope(body), POLICIES, "mutate", NoCluster(), _fault).verdict
    assert verdict.allowed, verdict.message
    if not verdict.patch:
        return obj, False
    answer = json.loads(verdict_body(review, verdict))["response"]
    operations = json.loads(base64.b64decode(answer["patch"]))
    return jsonpatch.apply_patch(obj, operations), True


def verdict_body(review: dict[str, Any], verdict: Any) -> bytes:
    from webhook.admission.review import response_body

    return response_body(review["apiVersion"], review["request"]["uid"], verdict)


def _fault(_: Any, error: BaseException) -> str:
    raise AssertionError(f"a fault: {error!r}")


def second_webhook(review: dict[str, Any], obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Another mutating webhook: it adds what is missing, and changes nothing twice."""
    request = review["request"]
    location = pod_template_location(request["kind"]["group"], request["kind"]["kind"])
    assert location is not None
    changed = copy.deepcopy(obj)
    spec: dict[str, Any] = changed
    for key in location.spec:
        spec = spec[key]
    containers = spec["containers"]
    if not any(container["name"] == SIDECAR["name"] for container in containers):
        containers.append(copy.deepcopy(SIDECAR))
    first = containers[0]
    if first.get("env"):
        first["env"] = sorted(first["env"], key=lambda variable: variable["name"])
    tolerations = spec.setdefault("tolerations", [])
    if TOLERATION not in tolerations:
        tolerations.append(dict(TOLERATION))
    return changed, changed != obj


@pytest.mark.parametrize("name", REVIEWS)
def test_our_output_through_another_webhook_and_back_converges(name: str) -> None:
    review = json.loads((SHIPPED / name / "review.json").read_text())
    review.pop("_http", None)
    obj, _ = ours(review, review["request"]["object"])
    rounds = 0
    while True:
        rounds += 1
        obj, theirs_changed = second_webhook(review, obj)
        obj, ours_changed = ours(review, obj)
        if not theirs_changed and not ours_changed:
            break
        assert rounds < MAX_ROUNDS, f"no fixed point within {MAX_ROUNDS} rounds"
    # Round 1 adds the sidecar and shares it; round 2 finds nothing to change on either side.
    assert rounds == 2
    # The sidecar's fraction became VRAM like any other share, and the record holds both.
    spec = obj
    request = review["request"]
    location = pod_template_location(request["kind"]["group"], request["kind"]["kind"])
    assert location is not None
    for key in location.spec:
        spec = spec[key]
    sidecar = next(c for c in spec["containers"] if c["name"] == SIDECAR["name"])
    (limit,) = sidecar["resources"]["limits"].items()
    assert limit[0] == "example.com/vram" and limit[1].isdigit()
    # And /validate accepts the object the two webhooks settled on.
    body = json.dumps({**review, "request": {**review["request"], "object": obj}}).encode()
    assert judge(decode_envelope(body), POLICIES, "validate", NoCluster(), _fault).verdict.allowed
