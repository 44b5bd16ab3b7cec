"""Policies that select pods by the GPU model they ask for (`spec.match.models`): one cluster,
a pool per backend, no labels on pods or namespaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from webhook.engine.evaluate import evaluate_pod
from webhook.engine.gpu_model import models_named_in
from webhook.engine.pod_spec import pod_parts
from webhook.engine.workloads import pod_template_location
from webhook.policy.loader import load_policy_directory
from webhook.policy.namespace_labels import StaticNamespaceLabels
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError

POOLS = Path(__file__).resolve().parents[2] / "examples" / "pools"
POD = pod_template_location("", "Pod")
DEPLOYMENT = pod_template_location("apps", "Deployment")


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    container = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "0.25"}}}
    return {"metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def affinity(operator: str, values: list[str]) -> dict[str, Any]:
    expression = {"key": "nvidia.com/gpu.product", "operator": operator, "values": values}
    terms = [{"matchExpressions": [expression]}]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}  # fmt: skip


def governing(policies: PolicySet, obj: dict[str, Any], location: Any = POD) -> str:
    parts = pod_parts(obj, location)
    labels = StaticNamespaceLabels(reason="none")
    return policies.select("team-a", {}, labels, models_named_in(location, parts)).policy.name


@pytest.mark.parametrize(
    ("spec", "policy"),
    [
        ({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"}}, "h200-hami"),
        ({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200-SHARED"}}, "h200-hami"),
        ({"affinity": affinity("In", ["NVIDIA-A100-SXM4-40GB"])}, "a100-mig"),
        ({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}, "built-in"),
        ({}, "built-in"),
        # Allowed on either pool's cards: neither pool alone holds it.
        ({"affinity": affinity("In", ["NVIDIA-H200", "NVIDIA-A100-SXM4-40GB"])}, "built-in"),
        # "Anything but": any other model too, so no pool alone holds it, whatever its name.
        ({"affinity": affinity("NotIn", ["Tesla-T4"])}, "built-in"),
        ({"affinity": affinity("NotIn", ["NVIDIA-H200"])}, "built-in"),
    ],
    ids=[
        "selector",
        "alias",
        "affinity",
        "another model",
        "no model",
        "both models",
        "not a T4",
        "not an H200",
    ],
)
def test_a_pod_is_governed_by_the_pool_of_the_model_it_asks_for(
    spec: dict[str, Any], policy: str
) -> None:
    policies = PolicySet.load(POOLS)
    assert governing(policies, pod(spec)) == policy
    template = {"metadata": {"name": "d"}, "spec": {"template": pod(spec)}}
    assert governing(policies, template, DEPLOYMENT) == policy


POLICY = """\
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {{name: {name}}}
spec:
  match:
    models: {models}
"""


def test_two_policies_that_select_one_model_overlap_and_lint_refuses_them(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POLICY.format(name="a", models="[NVIDIA-H200]"))
    (tmp_path / "b.yaml").write_text(
        POLICY.format(name="b", models="[NVIDIA-H200-SHARED, Tesla-T4]")
    )
    with pytest.raises(PolicyLoadError, match="could govern the same objects"):
        PolicySet.load(tmp_path)
    (tmp_path / "b.yaml").write_text(POLICY.format(name="b", models="[Tesla-T4]"))
    assert [p.name for p in load_policy_directory(tmp_path)] == ["a", "b"]


def test_a_model_the_catalogue_lacks_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POLICY.format(name="a", models="[GeForce-9000]"))
    with pytest.raises(PolicyLoadError, match="'GeForce-9000' is not in the GPU model catalogue"):
        load_policy_directory(tmp_path)


CATCH_ALL = """\
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: everyone}
spec:
  gpuResources: [{name: nvidia.com/gpu, fractions: Rewrite}]
  sharing:
    vramResource: example.com/vram
    models: [NVIDIA-A100-SXM4-40GB]
    defaultModel: NVIDIA-A100-SXM4-40GB
"""


def test_the_pin_the_webhook_wrote_selects_no_pool_as_sizing_ignores_it(tmp_path: Path) -> None:
    """A pod that named no model was pinned to the catch-all policy's default; a second pass
    (or a scan of it) must judge it under the same policy, not the pool of the pinned model."""
    (tmp_path / "everyone.yaml").write_text(CATCH_ALL)
    mig = (POOLS / "a100-mig.yaml").read_text().replace("spec:\n", "spec:\n  priority: 10\n", 1)
    (tmp_path / "a100-mig.yaml").write_text(mig)
    policies = PolicySet.load(tmp_path)
    obj = pod({})
    assert governing(policies, obj) == "everyone"
    outcome = evaluate_pod(obj, POD, policies.policies[0], "mutate")
    admitted = jsonpatch.apply_patch(obj, list(outcome.operations))
    assert admitted["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    assert governing(policies, admitted) == "everyone"
    # A pod that asks for the model itself is the pool's.
    asked = pod({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}})
    assert governing(policies, asked) == "a100-mig"


def test_a_model_selected_that_the_pool_cannot_size_is_refused(tmp_path: Path) -> None:
    policy = (
        (POOLS / "a100-mig.yaml")
        .read_text()
        .replace(
            "models: [NVIDIA-A100-SXM4-40GB]\n  gpuResources",
            "models: [NVIDIA-H200]\n  gpuResources",
        )
    )
    assert "match:\n    models: [NVIDIA-H200]" in policy
    (tmp_path / "a.yaml").write_text(policy)
    with pytest.raises(PolicyLoadError, match=r"spec\.sharing\.models cannot size it"):
        load_policy_directory(tmp_path)


def test_a_model_excluded_leaves_the_pods_asking_for_it_to_the_other_policies(
    tmp_path: Path,
) -> None:
    """Selection reads a pod's model where only an exclusion names models, too."""
    (tmp_path / "everyone.yaml").write_text(CATCH_ALL + "  exclude:\n    models: [NVIDIA-H200]\n")
    policies = PolicySet.load(tmp_path)
    assert policies.selects_by_model
    h200 = pod({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"}})
    assert governing(policies, h200) == "built-in"
    assert governing(policies, pod({})) == "everyone"
