"""Properties of the engine over generated pods: whatever a pod asks for, the mutated object
obeys the apiserver's extended-resource rules, the patch gives exactly that object, and a
second pass changes nothing."""

import copy
from pathlib import Path
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from webhook.engine.evaluate import evaluate_pod
from webhook.engine.workloads import pod_template_location
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import Policy
from webhook.quantity import parse_quantity

REPO_POLICIES = Path(__file__).resolve().parents[2] / "policies"
POLICY: Policy = load_policy_directory(REPO_POLICIES)[0]
POD = pod_template_location("", "Pod")
DEPLOYMENT = pod_template_location("apps", "Deployment")
RESOURCES = ["nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-1g.5gb", "example.com/vram", "cpu"]
MODELS = ["Tesla-T4", "NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3", "Unknown-GPU"]

amounts = st.one_of(
    st.sampled_from(["250m", "500m", "0.5", "0.125", "333m", "1", "2", "1500m", "-1", "0", "x"]),
    st.integers(min_value=1, max_value=999).map(lambda n: f"{n}m"),
    st.integers(min_value=0, max_value=8).map(str),
    st.integers(min_value=1, max_value=20000).map(str),
)


@st.composite
def resources(draw: st.DrawFn) -> dict[str, Any]:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    for name in draw(st.lists(st.sampled_from(RESOURCES), max_size=2, unique=True)):
        value = draw(amounts)
        shape = draw(
            st.sampled_from(["limits", "limits", "both", "both", "requests-only", "different"])
        )
        if shape != "requests-only":
            limits[name] = value
        if shape in ("both", "requests-only"):
            requests[name] = value
        if shape == "different":
            requests[name] = draw(amounts)
    result: dict[str, Any] = {}
    if limits:
        result["limits"] = limits
    if requests:
        result["requests"] = requests
    return result


@st.composite
def pod_specs(draw: st.DrawFn) -> dict[str, Any]:
    def container(prefix: str, index: int) -> dict[str, Any]:
        body: dict[str, Any] = {"name": f"{prefix}{index}", "image": "cuda:12"}
        if draw(st.booleans()):
            body["resources"] = draw(resources())
        if draw(st.booleans()):
            body["env"] = [{"name": "XLA_CLIENT_MEM_FRACTION", "value": "0.9"}]
        return body

    spec: dict[str, Any] = {
        "containers": [container("c", i) for i in range(draw(st.integers(1, 3)))],
    }
    inits = draw(st.integers(0, 2))
    if inits:
        spec["initContainers"] = [container("i", i) for i in range(inits)]
    if draw(st.booleans()):
        spec["nodeSelector"] = {"nvidia.com/gpu.product": draw(st.sampled_from(MODELS))}
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "example.com/vram", "operator": "Exists"}]
    return spec


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p"}
    if draw(st.booleans()):
        metadata["annotations"] = {"gpu-fraction": draw(st.sampled_from(["0.5", "0.25", "1.5"]))}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": draw(pod_specs())}


def assert_obeys_extended_resource_rules(spec: dict[str, Any]) -> None:
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind, []):
            resources = container.get("resources", {})
            limits, requests = resources.get("limits", {}), resources.get("requests", {})
            for name in {*limits, *requests}:
                if name == "cpu":
                    continue
                assert name in limits, (name, container)
                amount = parse_quantity(limits[name])
                assert amount.denominator == 1 and amount >= 0, (name, limits[name])
                if name in requests:
                    assert parse_quantity(requests[name]) == amount


def check(obj: dict[str, Any], location: Any, spec_of: Any) -> None:
    before = copy.deepcopy(obj)
    outcome = evaluate_pod(obj, location, POLICY, "mutate")
    assert obj == before, "the engine must not change its input"
    if outcome.violations:
        event("denied")
        assert not outcome.operations
        return
    event("rewritten" if outcome.rewritten else "patched" if outcome.operations else "untouched")
    mutated = jsonpatch.apply_patch(before, list(outcome.operations))
    if outcome.operations:
        assert mutated == outcome.document
    assert_obeys_extended_resource_rules(spec_of(mutated))
    again = evaluate_pod(mutated, location, POLICY, "mutate")
    assert again.violations == () and again.operations == (), again
    validated = evaluate_pod(mutated, location, POLICY, "validate")
    assert validated.violations == (), validated.violations


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods())
def test_mutated_pods_are_valid_and_a_second_pass_changes_nothing(pod: dict[str, Any]) -> None:
    check(pod, POD, lambda obj: obj["spec"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods())
def test_pod_templates_behave_like_pods(pod: dict[str, Any]) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"metadata": pod["metadata"], "spec": pod["spec"]}},
    }
    check(deployment, DEPLOYMENT, lambda obj: obj["spec"]["template"]["spec"])
