"""Pods generated for property tests of the engine: any mix of GPU resources, amounts right
and wrong, requests and limits, init containers, env, node selectors and tolerations."""

from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from webhook.engine.workloads import pod_template_location
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import Policy

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
