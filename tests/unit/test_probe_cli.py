"""`gpu-admission probe` (webhook/cli/probe.py) and the Job of deploy/probe: the share a pod gets
is made by the same engine as `review`, so the probe measures exactly the MiB and env that the
webhook gives, whether it renders them to a file, runs them here, or reads them in the Job's pod."""

from __future__ import annotations

import io
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kustomize import kustomize
from webhook.cli.main import build_parser
from webhook.cli.main import main as gpu_admission
from webhook.cli.probe import options_from, run_probe
from webhook.policy.policy_set import PolicySet
from webhook.probe.share import read_annotations_share

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples" / "policies"
EXTENDED_RESOURCE = EXAMPLES / "extended-resource"
FAKES = REPO_ROOT / "tests" / "fixtures" / "probe" / "fake-frameworks"
PROBE_DEPLOY = REPO_ROOT / "deploy" / "probe"


def run(*args: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = gpu_admission(list(args), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def rendered(policies: Path, *share: str, model: str = "Tesla-T4") -> dict[str, Any]:
    code, out, err = run(
        "probe", "--policies", str(policies), *share, "--model", model, "--render-only", "-"
    )
    assert code == 0, err
    return json.loads(out)


def reviewed(policies: Path, limits: dict[str, str], model: str) -> dict[str, Any]:
    """The pod `review` admits for the same request: the engine's own answer."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "same-share"},
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": model},
            "containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}],
        },
    }
    code, out, err = run(
        "review", "-f", "-", "--policies", str(policies), "-o", "json", stdin=json.dumps(pod)
    )
    assert code == 0, err
    (admitted,) = json.loads(out)["items"]
    return admitted


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", ()) if "value" in item}


# The render step ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policies", [EXTENDED_RESOURCE, REPO_ROOT / "policies"], ids=["example", "shipped"]
)
def test_a_quarter_of_a_t4_renders_to_the_mib_and_env_the_engine_gives(policies: Path) -> None:
    share = rendered(policies, "--fraction", "0.25")
    (container,) = reviewed(policies, {"nvidia.com/gpu": "0.25"}, "Tesla-T4")["spec"]["containers"]
    assert share["shareMiB"] == int(container["resources"]["limits"]["example.com/vram"])
    assert share["env"] == env_of(container) != {}
    (policy,) = PolicySet.load(policies).policies
    assert policy.sharing is not None
    tesla_t4 = policy.sharing.models["Tesla-T4"]
    assert share["shareMiB"] == policy.sharing.units_for(Fraction(1, 4), tesla_t4)
    assert share["model"] == "Tesla-T4" and share["fraction"] == "0.25"
    assert share["policy"] == policy.name and share["backend"] == "ExtendedResource"
    assert share["asked"] == "nvidia.com/gpu=0.25"


def test_an_amount_of_memory_is_asked_in_the_policys_vram_resource() -> None:
    share = rendered(EXTENDED_RESOURCE, "--memory", "4Gi")
    (container,) = reviewed(EXTENDED_RESOURCE, {"example.com/vram": "4Gi"}, "Tesla-T4")["spec"][
        "containers"
    ]
    assert share["shareMiB"] == 4096
    assert share["env"] == env_of(container)
    assert (share["memory"], share["asked"]) == ("4Gi", "example.com/vram=4Gi")


def test_a_share_a_backend_writes_in_gib_is_rendered_in_mib() -> None:
    # gpushare counts whole GiB: a quarter of a T4 (3840 MiB) is 3 GiB.
    share = rendered(EXAMPLES / "gpushare", "--fraction", "0.25")
    assert (share["shareMiB"], share["backend"]) == (3072, "Gpushare")


def test_the_share_file_is_written_where_asked(tmp_path: Path) -> None:
    path = tmp_path / "share.json"
    code, out, err = run(
        "probe",
        "--policies",
        str(EXTENDED_RESOURCE),
        "--fraction",
        "250m",
        "--model",
        "Tesla-T4",
        "--render-only",
        str(path),
    )
    assert (code, out) == (0, "")
    assert f"wrote {path}: 3840 MiB (policy extended-resource" in err
    assert json.loads(path.read_text())["shareMiB"] == 3840


@pytest.mark.parametrize(
    ("policies", "args", "words"),
    [
        (
            EXAMPLES / "mig",
            ["--fraction", "0.25", "--model", "Tesla-T4"],
            'the pod is denied by policy "mig"',
        ),
        (
            EXTENDED_RESOURCE,
            ["--fraction", "0.25", "--model", "NVIDIA-B200"],
            "is not a GPU model that policy",
        ),
        (EXTENDED_RESOURCE, ["--fraction", "1.5", "--model", "Tesla-T4"], "denied"),
        (EXTENDED_RESOURCE, ["--fraction", "1", "--model", "Tesla-T4"], "no share"),
        (
            REPO_ROOT / "examples" / "cookbook" / "production-whole-only" / "policies",
            ["--fraction", "0.25", "--model", "Tesla-T4", "-n", "prod-api"],
            'policy "production", which governs namespace "prod-api", shares no GPU',
        ),
        (Path("/nonexistent"), ["--fraction", "0.25", "--model", "Tesla-T4"], "does not exist"),
    ],
    ids=[
        "a denied pod",
        "a model the policy does not know",
        "a fraction above one",
        "a whole GPU",
        "a policy that shares nothing",
        "no policies",
    ],
)
def test_a_pod_that_gets_no_share_is_reported_and_exits_2(
    policies: Path, args: list[str], words: str
) -> None:
    code, out, err = run("probe", "--policies", str(policies), *args, "--render-only", "-")
    assert (code, out) == (2, "")
    reason = err.splitlines()[-1]  # after the warnings of an admitted pod
    assert reason.startswith("python -m webhook probe: ") and words in reason


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "Tesla-T4"],
        ["--fraction", "0.25"],
        ["--fraction", "0.25", "--memory", "4Gi", "--model", "Tesla-T4"],
    ],
    ids=["no share", "no model", "two shares"],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    code, _, err = run("probe", *args)
    assert code == 2 and "usage: python -m webhook probe" in err


# The probe, in this process ----------------------------------------------------------------


def test_without_a_gpu_the_probe_command_exits_2() -> None:
    args = build_parser().parse_args(
        ["probe", "--policies", str(EXTENDED_RESOURCE), "--fraction", "0.25", "--model", "Tesla-T4"]
    )
    with pytest.raises(Exception, match="no NVIDIA GPU here") as raised:
        run_probe(
            options_from(args),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
            find_missing_gpu=lambda: "no NVIDIA GPU here: nothing",
        )
    assert type(raised.value).__name__ == "InputError"


def test_the_probe_runs_the_frameworks_with_the_rendered_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(FAKES))
    monkeypatch.setenv("PYTHONPATH", str(FAKES))
    # A card the size of a T4's.
    monkeypatch.setenv("FAKE_GPU_TOTAL_MIB", "15360")
    share = rendered(EXTENDED_RESOURCE, "--fraction", "0.25")
    argv = ["--policies", str(EXTENDED_RESOURCE), "--fraction", "0.25", "--model", "Tesla-T4"]
    args = build_parser().parse_args(["probe", *argv, "--json"])
    out, err = io.StringIO(), io.StringIO()
    code = run_probe(options_from(args), stdout=out, stderr=err, find_missing_gpu=lambda: None)
    report = json.loads(out.getvalue())
    assert report["share"]["shareMiB"] == share["shareMiB"]
    assert report["env"] == share["env"]
    assert [entry["framework"] for entry in report["frameworks"]] == ["torch", "jax", "cupy"]
    assert code == (0 if report["holds"] else 1)


# The Job -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(kustomize(PROBE_DEPLOY)) if doc]


def job_of(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (job,) = [o for o in objects if o["kind"] == "Job"]
    return job


@pytest.mark.parametrize("version", ["1.28.0", "1.36.0"])
def test_the_probe_build_matches_the_kubernetes_schemas(
    built: list[dict[str, Any]], version: str
) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    assert sorted(o["kind"] for o in built) == ["Job", "NetworkPolicy"]
    for manifest in built:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_the_job_copies_the_probe_from_the_webhook_image_and_runs_it_on_its_annotations(
    built: list[dict[str, Any]],
) -> None:
    job = job_of(built)
    assert (job["spec"]["backoffLimit"], job["spec"]["ttlSecondsAfterFinished"] > 0) == (0, True)
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    (copy,) = spec["initContainers"]
    (probe,) = spec["containers"]
    # The webhook's image, where the Dockerfile puts the package.
    server = yaml.safe_load((REPO_ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    assert copy["image"] == server["spec"]["template"]["spec"]["containers"][0]["image"]
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert "WORKDIR /app" in dockerfile and "COPY webhook/ webhook/" in dockerfile
    assert copy["command"][:-1] == ["cp", "-R", "/app/webhook"]
    source = copy["command"][-1].rstrip("/")
    assert {m["mountPath"] for m in copy["volumeMounts"]} == {source}
    env = env_of(probe)
    assert env["PYTHONPATH"] == source
    # It reads the annotations the downward API mounts.
    mounts = {m["name"]: m["mountPath"] for m in probe["volumeMounts"]}
    (podinfo,) = [v for v in spec["volumes"] if "downwardAPI" in v]
    (item,) = podinfo["downwardAPI"]["items"]
    assert item["fieldRef"]["fieldPath"] == "metadata.annotations"
    annotations = f"{mounts[podinfo['name']]}/{item['path']}"
    assert probe["command"] == [
        "python3",
        "-m",
        "webhook.probe",
        "run",
        "--annotations",
        annotations,
    ]
    assert probe["resources"]["limits"]["nvidia.com/gpu"] == "0.25"


def test_the_job_runs_hardened(built: list[dict[str, Any]]) -> None:
    spec = job_of(built)["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["automountServiceAccountToken"] is False
    for container in (*spec["initContainers"], *spec["containers"]):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert {"cpu", "memory"} <= set(container["resources"]["limits"])


def test_the_job_asks_for_its_share_through_the_webhook_and_reads_it_back(
    built: list[dict[str, Any]], tmp_path: Path
) -> None:
    job = job_of(built)
    manifest = tmp_path / "job.json"
    manifest.write_text(json.dumps(job))
    code, out, err = run("review", "-f", str(manifest), "--policies", "policies", "-o", "json")
    assert code == 0, err
    (admitted,) = json.loads(out)["items"]
    template = admitted["spec"]["template"]
    (probe,) = template["spec"]["containers"]
    vram = int(probe["resources"]["limits"]["example.com/vram"])
    # The pod's annotations, as the kubelet writes them into the downward-API volume.
    lines = [
        f"{key}={json.dumps(value)}" for key, value in template["metadata"]["annotations"].items()
    ]
    annotations = tmp_path / "annotations"
    annotations.write_text("\n".join(sorted(lines)))
    share = read_annotations_share(annotations)
    assert (share.mib, share.about["container"]) == (vram, "probe")


def test_no_overlay_of_the_webhook_includes_the_probe() -> None:
    for kustomization in (REPO_ROOT / "deploy").rglob("kustomization.yaml"):
        if kustomization.parent != PROBE_DEPLOY:
            assert "probe" not in kustomization.read_text(), kustomization
