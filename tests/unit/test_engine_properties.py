"""Properties of the engine over generated pods: whatever a pod asks for, the mutated object
obeys the apiserver's extended-resource rules, the patch gives exactly that object, and a
second pass changes nothing."""

import copy
from fractions import Fraction
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tests.support.generated_pods import DEPLOYMENT, POD, POLICY, pods
from webhook.engine.evaluate import evaluate_pod
from webhook.quantity import parse_quantity


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


FRACTIONS = st.sampled_from(["125m", "250m", "0.25", "0.5", "500m", "333m", "0.75", "900m"])
KNOWN_MODELS = ["Tesla-T4", "NVIDIA-A100-SXM4-40GB", "NVIDIA-L4", "NVIDIA-H100-80GB-HBM3"]


# Two shares of a pod share one card: each at most half of it, so that they always fit.
HALF_OR_LESS = st.sampled_from(["125m", "250m", "0.25", "0.5", "500m", "333m"])


@st.composite
def fractional_deployments(draw: st.DrawFn, fraction: Any = FRACTIONS) -> dict[str, Any]:
    """Deployments that ask for a valid share in one or two containers (together no more
    than the card)."""
    containers = []
    count = draw(st.integers(1, 2))
    both = count == 2 and draw(st.booleans())
    for index in range(count):
        limits: dict[str, Any] = {"memory": "1Gi"}
        if index == 0 or both:
            limits["nvidia.com/gpu"] = draw(HALF_OR_LESS if both else fraction)
        container: dict[str, Any] = {"name": f"c{index}", "resources": {"limits": limits}}
        if draw(st.booleans()):
            container["env"] = [{"name": "USER_VAR", "value": "kept"}]
        containers.append(container)
    spec: dict[str, Any] = {"containers": containers}
    if draw(st.booleans()):
        spec["nodeSelector"] = {"nvidia.com/gpu.product": draw(st.sampled_from(KNOWN_MODELS))}
    template: dict[str, Any] = {"spec": spec}
    if draw(st.booleans()):
        template["metadata"] = {"labels": {"app": "x"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": template},
    }


def mutate(deployment: dict[str, Any]) -> dict[str, Any]:
    outcome = evaluate_pod(deployment, DEPLOYMENT, POLICY, "mutate")
    assert outcome.violations == (), outcome.violations
    return jsonpatch.apply_patch(deployment, list(outcome.operations))


def asked_fractions(deployment: dict[str, Any]) -> dict[int, str]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return {
        index: container["resources"]["limits"]["nvidia.com/gpu"]
        for index, container in enumerate(containers)
        if "nvidia.com/gpu" in container["resources"]["limits"]
    }


def put_back(stored: dict[str, Any], fractions: dict[int, str]) -> dict[str, Any]:
    """What a client-side `kubectl apply` sends: the stored object with the manifest's
    fields merged in, so the fractions return beside the VRAM they became."""
    merged = copy.deepcopy(stored)
    containers = merged["spec"]["template"]["spec"]["containers"]
    for index, fraction in fractions.items():
        containers[index]["resources"]["limits"]["nvidia.com/gpu"] = fraction
    return merged


@settings(max_examples=120, deadline=None)
@given(fractional_deployments())
def test_valid_fractions_are_always_rewritten(deployment: dict[str, Any]) -> None:
    outcome = evaluate_pod(deployment, DEPLOYMENT, POLICY, "mutate")
    assert outcome.violations == ()
    assert outcome.rewritten.count("->") == len(asked_fractions(deployment))
    containers = mutate(deployment)["spec"]["template"]["spec"]["containers"]
    for index in asked_fractions(deployment):
        limits = containers[index]["resources"]["limits"]
        assert "nvidia.com/gpu" not in limits and int(limits["example.com/vram"]) > 0


@settings(max_examples=120, deadline=None)
@given(fractional_deployments())
def test_reapplying_the_same_manifest_changes_nothing(deployment: dict[str, Any]) -> None:
    stored = mutate(deployment)
    assert mutate(put_back(stored, asked_fractions(deployment))) == stored


@settings(max_examples=120, deadline=None)
@given(fractional_deployments(), FRACTIONS)
def test_a_changed_share_gives_what_creating_it_anew_gives(
    deployment: dict[str, Any], new_fraction: str
) -> None:
    asked = asked_fractions(deployment)
    assume(len(asked) == 1 or parse_quantity(new_fraction) <= Fraction(1, 2))
    stored = mutate(deployment)
    changed = {index: new_fraction for index in asked}
    fresh = copy.deepcopy(deployment)
    for index, fraction in changed.items():
        fresh["spec"]["template"]["spec"]["containers"][index]["resources"]["limits"][
            "nvidia.com/gpu"
        ] = fraction
    assert mutate(put_back(stored, changed)) == mutate(fresh)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
ODD_PLACES = [
    ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    ("spec", "containers", 0, "resources", "requests"),
    ("spec", "containers", 0, "env"),
    ("spec", "containers", 0, "env", 0),
    ("spec", "nodeSelector"),
    ("spec", "nodeSelector", "nvidia.com/gpu.product"),
    ("spec", "tolerations"),
    ("spec", "tolerations", 0),
    ("spec", "affinity", "nodeAffinity"),
    (
        "spec",
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    ),
    ("metadata", "annotations", "gpu-fraction"),
    ("metadata", "annotations", "gpu-fraction-container-name"),
    ("metadata", "annotations", "gpu-admission.example.com/shares"),
]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(ODD_PLACES), json_values)
def test_odd_values_anywhere_are_denied_or_handled_never_a_crash(
    place: tuple[Any, ...], value: Any
) -> None:
    from webhook.engine.pod_spec import MalformedObject

    pod: dict[str, Any] = {
        "metadata": {"name": "p", "annotations": {"gpu-fraction": "0.5"}},
        "spec": {
            "containers": [
                {
                    "name": "a",
                    "resources": {"limits": {"nvidia.com/gpu": "250m"}},
                    "env": [{"name": "A", "value": "1"}],
                }
            ],
            "nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
    }
    node: Any = pod
    for part in place[:-1]:
        node = node[part] if isinstance(node, list) else node.setdefault(part, {})
    node[place[-1]] = value
    try:
        evaluate_pod(pod, POD, POLICY, "mutate")
        evaluate_pod(pod, POD, POLICY, "validate")
    except MalformedObject:
        pass
