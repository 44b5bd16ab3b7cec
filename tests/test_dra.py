"""The DRA backend: a share as a ResourceClaim made from a template, checked against the
Kubernetes schemas, the drivers' own code (tests/contracts/dra_drivers_source.py), UPDATE and
backend changes, and the server that makes the templates before it answers."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml

from tests.contracts import dra_drivers_source as drivers
from tests.support.fake_apiserver import FakeApiServer
from tests.support.server import REPO_ROOT
from webhook.cli.main import main
from webhook.engine.backends.dra_claims import request_mib
from webhook.engine.evaluate import evaluate_pod
from webhook.engine.findings import ShareIntent
from webhook.engine.pod_spec import Container, MalformedObject
from webhook.engine.shares import SizedShare
from webhook.engine.workloads import pod_template_location
from webhook.kube.claim_templates import LAST_NEEDED_ANNOTATION, ClaimTemplateWriter
from webhook.kube.client_config import api_client
from webhook.policy.catalogue import built_in_catalogue
from webhook.policy.dra_settings import nvidia_config_problems
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import DraSettings, Policy
from webhook.server.app import create_app
from webhook.server.settings import Settings

EXAMPLE = REPO_ROOT / "examples" / "dra"
PODS = EXAMPLE / "tests" / "pods.yaml"
KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")
H200 = built_in_catalogue()["NVIDIA-H200"]
MIB = 2**20


def review(namespace: str, file: Path = PODS, policies: Path = EXAMPLE) -> list[dict[str, Any]]:
    out = io.StringIO()
    code = main(
        ["review", "-f", str(file), "--policies", str(policies), "-n", namespace],
        stdout=out,
        stderr=io.StringIO(),
    )
    assert code == 0
    return [doc for doc in yaml.safe_load_all(out.getvalue()) if doc]


def named(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    return next(
        obj
        for obj in objects
        if obj["kind"] == kind and (name is None or obj["metadata"]["name"] == name)
    )


def template_of(objects: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]["template"]["spec"] if pod["kind"] == "Deployment" else pod["spec"]
    name = spec["resourceClaims"][0]["resourceClaimTemplateName"]
    return named(objects, "ResourceClaimTemplate", name)


def test_a_quarter_h200_becomes_a_claim_of_35942mi_from_the_policys_class() -> None:
    objects = review("team-a")
    pod = named(objects, "Pod", "quarter-of-an-h200")
    container = pod["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container.get("resources", {}).get("limits", {})
    assert container["resources"]["claims"] == [{"name": "gpu-share-infer"}]
    template = template_of(objects, pod)
    assert template["metadata"]["namespace"] == "team-a"
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request == {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "capacity": {"requests": {"memory": "35942Mi"}},
        },
    }
    # Printed before the object that needs it, and once for both objects of one size.
    kinds = [obj["kind"] for obj in objects]
    assert kinds.index("ResourceClaimTemplate") < kinds.index("Pod")


def test_a_fallback_policy_lists_its_alternatives_in_order() -> None:
    objects = review("team-b")
    pod = named(objects, "Pod", "sixteen-gib")
    request = template_of(objects, pod)["spec"]["spec"]["devices"]["requests"][0]
    names = [alternative["name"] for alternative in request["firstAvailable"]]
    assert names == ["mig", "share", "whole"]
    mig, share, whole = request["firstAvailable"]
    expression = mig["selectors"][0]["cel"]["expression"]
    assert mig["deviceClassName"] == "mig.nvidia.com" and "'1g.18gb'" in expression
    assert share["capacity"]["requests"]["memory"] == "16384Mi"
    assert whole == {"name": "whole", "deviceClassName": "gpu.nvidia.com"}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("namespace", ["team-a", "team-b", "team-c"])
def test_every_object_review_prints_validates_against_kubernetes(
    namespace: str, version: str
) -> None:
    for obj in review(namespace):
        kubernetes_validate.validate(obj, version, strict=True)


def test_a_share_is_consumed_on_nvidias_device_as_the_template_asks() -> None:
    objects = review("team-a")
    template = template_of(objects, named(objects, "Pod", "quarter-of-an-h200"))
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    device = drivers.nvidia_memory_policy("memory", H200.memory_mib * MIB)
    asked = _bytes(request["capacity"]["requests"])
    assert drivers.claim_consumption(asked, device) == {"memory": 35942 * MIB}
    # Four quarters fit on one card, as the sizing (rounded down) promised; a fifth does not.
    assert drivers.claim_consumption(asked, device, already={"memory": 3 * 35942 * MIB})
    assert not drivers.claim_consumption(asked, device, already={"memory": 4 * 35942 * MIB})


def test_hamis_driver_holds_the_container_to_the_share_and_its_cores() -> None:
    objects = review("team-c")
    template = template_of(objects, named(objects, "Pod", "quarter-of-an-h200"))
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == drivers.HAMI_DRIVER
    device = drivers.hami_device_capacity(H200.memory_mib * MIB)
    consumed = drivers.claim_consumption(_bytes(request["capacity"]["requests"]), device)
    assert consumed is not None
    env = drivers.hami_container_env(consumed, device_bytes=H200.memory_mib * MIB)
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "35942m"
    assert env["CUDA_DEVICE_SM_LIMIT_0"] == "24"


@pytest.mark.parametrize(
    "sharing",
    [
        None,
        {"strategy": "TimeSlicing"},
        {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}},
        {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Sometimes"}},
        {"strategy": "TimeSlicing", "timeSlicingConfig": {}},
        {"strategy": "MPS"},
        {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
        {"strategy": "Fair"},
        {"strategy": "TimeSlicing", "slices": 2},
    ],
    ids=str,
)
def test_lint_refuses_a_gpu_config_exactly_where_nvidias_driver_would(
    sharing: dict[str, Any] | None,
) -> None:
    parameters: dict[str, Any] = {"apiVersion": drivers.NVIDIA_API_VERSION, "kind": "GpuConfig"}
    if sharing is not None:
        parameters["sharing"] = sharing
    refused = drivers.nvidia_gpu_config_refusal(
        parameters, consumable_shares=True, gates=frozenset({"TimeSlicingSettings"})
    )
    assert bool(nvidia_config_problems(parameters)) == (refused is not None), refused


@pytest.mark.parametrize(
    ("mib", "step", "asked"),
    [(35942, 1, 35942), (35942, 256, 36097), (512, 512, 513), (513, 512, 513), (1, 256, 1)],
)
def test_request_mib_asks_what_the_allocator_consumes_on_a_memory_mode_device(
    mib: int, step: int, asked: int
) -> None:
    share = _sized(mib)
    assert request_mib(share, DraSettings("gpu.nvidia.com", request_step_mib=step)) == asked
    # NVIDIA's memory mode and HAMi's devices: min 1Mi; here with the step the policy names.
    device = drivers.nvidia_memory_policy("memory", H200.memory_mib * MIB)["memory"]
    device = {**device, "step": step * MIB}
    for amount in (mib, asked):
        assert drivers.consumed_capacity(amount * MIB, **device) == asked * MIB


def _bytes(requests: dict[str, str]) -> dict[str, int]:
    return {name: drivers.quantity_value(amount) for name, amount in requests.items()}


def _sized(mib: int) -> SizedShare:
    container = Container("containers", 0, "infer", ("spec",), {}, {}, {})
    intent = ShareIntent(container, "vram", "example.com/vram", str(mib), None, mib)
    return SizedShare(intent, H200, mib, mib)


# UPDATE and backend changes -------------------------------------------------------------


def _policy(name: str) -> Policy:
    return next(p for p in load_policy_directory(EXAMPLE) if p.name == name)


def _mutate(obj: dict[str, Any], policy: Policy) -> dict[str, Any]:
    location = pod_template_location("apps", obj["kind"])
    assert location is not None
    outcome = evaluate_pod(obj, location, policy, "mutate")
    assert not outcome.violations, outcome.violations
    patched = jsonpatch.apply_patch(obj, list(outcome.operations))
    again = evaluate_pod(patched, location, policy, "mutate")
    assert not again.operations, "a second pass changes nothing"
    return patched


def _deployment() -> dict[str, Any]:
    return next(d for d in yaml.safe_load_all(PODS.read_text()) if d["kind"] == "Deployment")


def test_a_deployment_back_on_a_whole_gpu_keeps_nothing_of_its_claim() -> None:
    policy = _policy("h200-share")
    shared = _mutate(_deployment(), policy)
    edited = json.loads(json.dumps(shared))
    container = edited["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    whole = _mutate(edited, policy)
    spec = whole["spec"]["template"]["spec"]
    assert "resourceClaims" not in spec
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert spec["containers"][0].get("env", []) == []
    assert "annotations" not in whole["spec"]["template"]["metadata"] or not any(
        key.startswith("gpu-admission.example.com/")
        for key in whole["spec"]["template"]["metadata"]["annotations"]
    )


def test_a_new_size_names_a_new_template_and_keeps_one_claim() -> None:
    policy = _policy("h200-share")
    shared = _mutate(_deployment(), policy)
    edited = json.loads(json.dumps(shared))
    edited["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "nvidia.com/gpu": "0.5"
    }
    resized = _mutate(edited, policy)
    spec = resized["spec"]["template"]["spec"]
    before = shared["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    (claim,) = spec["resourceClaims"]
    assert claim["name"] == "gpu-share-lab" and before.startswith("gpu-share-17971mi-")
    assert claim["resourceClaimTemplateName"].startswith("gpu-share-71885mi-")
    assert spec["containers"][0]["resources"] == {"claims": [{"name": "gpu-share-lab"}]}


def test_a_pool_moved_off_dra_leaves_no_claim_behind(tmp_path: Path) -> None:
    shared = _mutate(_deployment(), _policy("h200-share"))
    moved = (REPO_ROOT / "examples" / "policies" / "extended-resource").resolve()
    policy = next(iter(load_policy_directory(moved)))
    assert policy.sharing is not None and policy.sharing.dra is None
    rewritten = _mutate(shared, policy)
    spec = rewritten["spec"]["template"]["spec"]
    assert "resourceClaims" not in spec
    assert "claims" not in spec["containers"][0]["resources"]
    assert spec["containers"][0]["resources"]["limits"].get(policy.sharing.vram_resource)


def test_validate_accepts_the_claim_and_refuses_a_share_the_mutating_webhook_missed() -> None:
    policy = _policy("h200-share")
    location = pod_template_location("apps", "Deployment")
    assert location is not None
    shared = _mutate(_deployment(), policy)
    assert not evaluate_pod(shared, location, policy, "validate").violations
    missed = evaluate_pod(_deployment(), location, policy, "validate").violations
    assert [v.rule for v in missed] == ["not-rewritten"]
    assert "resource claim gpu-share-lab" in missed[0].message


# The server makes the templates ----------------------------------------------------------


@pytest.fixture
def api(cluster_api: FakeApiServer) -> FakeApiServer:
    return cluster_api


def _posted(api: FakeApiServer, *, dry_run: bool) -> dict[str, Any]:
    folder = REPO_ROOT / "tests" / "scenarios" / "dra" / "share-quarter"
    body = json.loads((folder / "review.json").read_text())
    body.pop("_http", None)
    body["request"]["dryRun"] = dry_run
    settings = Settings(policy_dir=EXAMPLE, claim_templates="kubeconfig", namespace_labels="off")
    client = create_app(settings).test_client()
    return client.post("/mutate", json=body).get_json()["response"]


def test_the_server_makes_the_template_in_the_namespace_before_it_answers(
    api: FakeApiServer,
) -> None:
    answer = _posted(api, dry_run=False)
    assert answer["allowed"] is True
    patch = json.loads(base64.b64decode(answer["patch"]))
    claims = next(op["value"] for op in patch if op["path"] == "/spec/resourceClaims")
    made = api.claim_templates()
    key = ("team-a", claims[0]["resourceClaimTemplateName"])
    assert list(made) == [key]
    assert LAST_NEEDED_ANNOTATION in made[key]["metadata"]["annotations"]


def test_a_dry_run_makes_no_template(api: FakeApiServer) -> None:
    answer = _posted(api, dry_run=True)
    assert answer["allowed"] is True and answer["patch"]
    assert api.claim_templates() == {}


def test_a_template_that_cannot_be_made_denies_the_object_with_the_reason(
    api: FakeApiServer,
) -> None:
    api.forbid("create", "resourceclaimtemplates")
    answer = _posted(api, dry_run=False)
    assert answer["allowed"] is False
    assert "could not make ResourceClaimTemplate" in answer["status"]["message"]


def test_an_existing_template_is_stamped_as_needed_once_a_minute_not_per_pod(
    api: FakeApiServer,
) -> None:
    """The second writer meets the template as the apiserver stores it (defaults filled in,
    quantities canonical), and takes it for the one it wants."""
    template = next(obj for obj in review("team-a") if obj["kind"] == "ResourceClaimTemplate")
    template = {**template, "metadata": {**template["metadata"]}}
    del template["metadata"]["namespace"]
    now = [1_000_000.0]
    client = api_client("kubeconfig")
    writer = ClaimTemplateWriter(client, clock=lambda: now[0])  # type: ignore[arg-type]
    assert writer.ensure("team-a", [template]) is None
    writes = len(api.writes())
    assert writer.ensure("team-a", [template]) is None
    assert len(api.writes()) == writes, "a fresh stamp is not made again"
    now[0] += 120
    other = ClaimTemplateWriter(client, clock=lambda: now[0])  # type: ignore[arg-type]
    assert other.ensure("team-a", [template]) is None
    stored = api.claim_templates()[("team-a", template["metadata"]["name"])]
    assert stored["metadata"]["annotations"][LAST_NEEDED_ANNOTATION].endswith("T13:48:40Z")


def test_a_template_of_that_name_with_another_spec_is_not_taken_for_ours(
    api: FakeApiServer,
) -> None:
    template = next(obj for obj in review("team-a") if obj["kind"] == "ResourceClaimTemplate")
    forged = json.loads(json.dumps(template))
    forged["spec"]["spec"]["devices"]["requests"][0]["exactly"]["capacity"] = {
        "requests": {"memory": "143771Mi"}
    }
    del forged["metadata"]["annotations"]  # made by hand, from our output
    api.put_claim_template("team-a", forged)
    client = api_client("kubeconfig")
    writer = ClaimTemplateWriter(client)  # type: ignore[arg-type]
    problem = writer.ensure("team-a", [template])
    assert problem is not None and "was not made by this webhook" in problem


def test_the_dra_example_suite_passes_and_lints_clean() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(["test", str(EXAMPLE)], stdout=out, stderr=err) == 0, out.getvalue()
    assert "4 passed, 0 failed" in out.getvalue()
    linted = io.StringIO()
    assert main(["lint", str(EXAMPLE)], stdout=linted, stderr=err) == 0
    assert "3 policies OK: h200-fallback, h200-share, hami-dra" in linted.getvalue()
    # NVIDIA's pools are named unenforced, with advice that fits DRA (MPS is refused there).
    assert "hardLimit: HAMiCore, or a MIG alternative" in linted.getvalue()


def _pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "infer", "resources": {"limits": {"nvidia.com/gpu": "0.25"}}}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [container], **spec},
    }


def _judged(pod: dict[str, Any]) -> Any:
    location = pod_template_location("", "Pod")
    assert location is not None
    return evaluate_pod(pod, location, _policy("h200-share"), "mutate")


def test_a_pod_bound_by_name_is_refused_as_no_scheduler_allocates_its_claim() -> None:
    outcome = _judged(_pod(nodeName="gpu-node-1"))
    assert [v.rule for v in outcome.violations] == ["node-assigned"]
    assert "kubelet does not start a pod whose claim nobody allocated" in str(outcome.violations)


def test_a_claim_name_the_pod_uses_already_is_refused_and_its_own_claims_kept() -> None:
    taken = _judged(_pod(resourceClaims=[{"name": "gpu-share-infer", "resourceClaimName": "x"}]))
    assert [v.rule for v in taken.violations] == ["claim-name-taken"]
    own = {"name": "scratch", "resourceClaimName": "scratch-disk"}
    pod = _pod(
        resourceClaims=[own],
        container={
            "resources": {"limits": {"nvidia.com/gpu": "0.25"}, "claims": [{"name": "scratch"}]}
        },
    )
    patched = jsonpatch.apply_patch(pod, list(_judged(pod).operations))
    assert patched["spec"]["resourceClaims"][0] == own
    assert patched["spec"]["containers"][0]["resources"]["claims"] == [
        {"name": "scratch"},
        {"name": "gpu-share-infer"},
    ]


def test_claims_of_the_wrong_type_are_a_malformed_object_not_a_fault() -> None:
    with pytest.raises(MalformedObject, match="must be a list"):
        _judged(
            _pod(container={"resources": {"limits": {"nvidia.com/gpu": "0.25"}, "claims": "x"}})
        )
    with pytest.raises(MalformedObject, match="must be a list"):
        _judged(_pod(resourceClaims={"name": "x"}))


# The drivers' own demo specs, as data: what a share's claim and pod must look like.
# dra-driver-nvidia-gpu demo/specs/consumable-shares/memory-sharing.yaml @ 95932046.
NVIDIA_DEMO_REQUEST = {
    "name": "gpu",
    "exactly": {"deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": "4Gi"}}},
}
# Project-HAMi/k8s-dra-driver demo/yaml/setup.yaml @ ebeaad97 (v0.1.0): claim single-gpu-0.
HAMI_DEMO_EXACTLY = {
    "deviceClassName": "hami-core-gpu.project-hami.io",
    "capacity": {"requests": {"cores": 30, "memory": "4Gi"}},
}


def _sixteen_gib(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    objects = review(namespace)
    pod = named(objects, "Pod", "sixteen-gib")
    return pod, template_of(objects, pod)


def test_a_share_of_memory_is_asked_as_nvidias_demo_asks_it() -> None:
    pod, template = _sixteen_gib("team-a")
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    amounts = request["exactly"]["capacity"]["requests"]
    assert drivers.quantity_value(amounts["memory"]) == 16 * 2**30
    demo = NVIDIA_DEMO_REQUEST["exactly"]
    assert request["name"] == NVIDIA_DEMO_REQUEST["name"]
    assert request["exactly"]["deviceClassName"] == demo["deviceClassName"]
    assert set(amounts) == set(demo["capacity"]["requests"])
    # The pod side of the demo: the claim made from the template, used by the container.
    (claim,) = pod["spec"]["resourceClaims"]
    assert set(claim) == {"name", "resourceClaimTemplateName"}
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": claim["name"]}]


def test_a_share_on_hamis_driver_asks_what_its_demo_asks() -> None:
    _, template = _sixteen_gib("team-c")
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == HAMI_DEMO_EXACTLY["deviceClassName"]
    assert set(exactly["capacity"]["requests"]) == set(HAMI_DEMO_EXACTLY["capacity"]["requests"])
    assert exactly["capacity"]["requests"]["cores"] == str(16384 * 100 // H200.memory_mib)


@pytest.mark.parametrize("backend", ["extended-resource", "kai", "hami"])
def test_a_pool_moved_onto_dra_keeps_nothing_of_its_old_backend(backend: str) -> None:
    earlier = next(iter(load_policy_directory(REPO_ROOT / "examples" / "policies" / backend)))
    before = _mutate(_deployment(), earlier)
    moved = _mutate(before, _policy("h200-share"))
    template = moved["spec"]["template"]
    container = template["spec"]["containers"][0]
    assert container["resources"] == {"claims": [{"name": "gpu-share-lab"}]}
    assert "schedulerName" not in template["spec"]
    assert not set(template["metadata"].get("annotations", {})) & {"gpu-fraction", "gpu-memory"}
    assert "kai.scheduler/queue" not in template["metadata"].get("labels", {})


def _first_template() -> dict[str, Any]:
    template = next(obj for obj in review("team-b") if obj["kind"] == "ResourceClaimTemplate")
    del template["metadata"]["namespace"]
    return template


def test_a_template_stored_without_its_capacity_is_refused_naming_the_gate(
    api: FakeApiServer,
) -> None:
    api.consumable_capacity = False
    writer = ClaimTemplateWriter(api_client("kubeconfig"))  # type: ignore[arg-type]
    problem = writer.ensure("team-b", [_first_template()])
    assert problem is not None and "DRAConsumableCapacity is off" in problem


def test_making_templates_keeps_inside_the_webhooks_timeout(api: FakeApiServer) -> None:
    writer = ClaimTemplateWriter(api_client("kubeconfig"), budget_seconds=0)  # type: ignore[arg-type]
    problem = writer.ensure("team-b", [_first_template()])
    assert problem is not None and "no time was left" in problem
    assert api.claim_templates() == {}


def test_the_policys_selectors_hold_for_every_alternative_of_its_class(tmp_path: Path) -> None:
    text = (EXAMPLE / "h200-fallback.yaml").read_text()
    pin = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
    text = text.replace(
        "      deviceClassName: gpu.nvidia.com\n      firstAvailable:",
        f'      deviceClassName: gpu.nvidia.com\n      selectors: ["{pin}"]\n      firstAvailable:',
    )
    assert pin in text
    (tmp_path / "policy.yaml").write_text(text)
    objects = review("team-b", policies=tmp_path)
    request = template_of(objects, named(objects, "Pod", "sixteen-gib"))["spec"]["spec"]
    mig, share, whole = request["devices"]["requests"][0]["firstAvailable"]
    for alternative in (share, whole):
        assert alternative["selectors"][0]["cel"]["expression"] == pin
    assert all(s["cel"]["expression"] != pin for s in mig["selectors"])


def test_lint_refuses_hami_core_on_nvidias_class(tmp_path: Path) -> None:
    text = (
        (EXAMPLE / "hami.yaml")
        .read_text()
        .replace("hami-core-gpu.project-hami.io", "gpu.nvidia.com")
    )
    (tmp_path / "policy.yaml").write_text(text)
    out = io.StringIO()
    assert main(["lint", str(tmp_path)], stdout=out, stderr=io.StringIO()) == 1
    assert "HAMiCore holds a share only on HAMi's driver, and gpu.nvidia.com" in out.getvalue()


DEVICE_CLASSES = EXAMPLE / "cluster" / "deviceclasses.yaml"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_device_classes_the_examples_ask_validate_and_are_the_ones_asked(
    version: str,
) -> None:
    classes = list(yaml.safe_load_all(DEVICE_CLASSES.read_text()))
    for device_class in classes:
        kubernetes_validate.validate(device_class, version, strict=True)
    names = {device_class["metadata"]["name"] for device_class in classes}
    for policy in load_policy_directory(EXAMPLE):
        assert policy.sharing is not None and policy.sharing.dra is not None
        dra = policy.sharing.dra
        asked = {dra.device_class_name, *(c.device_class_name for c in dra.first_available)}
        assert asked <= names, policy.name
