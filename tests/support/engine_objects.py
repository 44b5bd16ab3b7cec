"""Pods and Deployments for engine tests, and the checks every mutation must pass."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

from webhook.admission.review import AdmissionRequest, decode_envelope, read_request
from webhook.engine.evaluate import PodOutcome, evaluate_pod
from webhook.engine.workloads import PodTemplateLocation
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.model import Policy


def pod(
    limits: dict[str, str] | None = None,
    *,
    runtime_class: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "infer", "image": "cuda:12"}
    if limits is not None:
        container["resources"] = {"limits": limits}
    spec: dict[str, Any] = {"containers": [container]}
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    metadata: dict[str, Any] = {"name": "p"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def deployment(of: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"metadata": of["metadata"], "spec": of["spec"]}},
    }


def spec_of(obj: dict[str, Any], location: PodTemplateLocation) -> dict[str, Any]:
    node: Any = obj
    for part in location.spec:
        node = node[part]
    return node


def record_of(obj: dict[str, Any], location: PodTemplateLocation) -> dict[str, Any]:
    node: Any = obj
    for part in location.metadata:
        node = node[part]
    return json.loads(node["annotations"][SHARES_ANNOTATION])


def mutated(
    obj: dict[str, Any], location: PodTemplateLocation, policy: Policy
) -> tuple[PodOutcome, dict[str, Any]]:
    """The outcome of /mutate and the object its patch gives, checked as every scenario is:
    the patch gives the engine's document, a second pass changes nothing, /validate agrees."""
    outcome = evaluate_pod(obj, location, policy, "mutate")
    assert outcome.violations == (), outcome.violations
    result = jsonpatch.apply_patch(obj, list(outcome.operations))
    again = evaluate_pod(result, location, policy, "mutate")
    assert again.violations == () and again.operations == (), again
    validated = evaluate_pod(result, location, policy, "validate")
    assert validated.violations == () and validated.operations == (), validated
    return outcome, result


def pod_request(obj: dict[str, Any], name: str = "p") -> AdmissionRequest:
    """The request of a CREATE of this Pod in `default`, as `decide` takes it."""
    envelope = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name,
            "namespace": "default",
            "operation": "CREATE",
            "object": obj,
        },
    }
    return read_request(decode_envelope(json.dumps(envelope).encode()))
