"""`gpu-admission scan` against a fake of the kube-apiserver's list endpoints: every kind the
webhook judges is listed across namespaces, page by page, and each object is reported as the
policies would answer it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_apiserver import WORKLOAD_PATHS, FakeApiServer
from tests.support.workload_objects import deployment_of
from webhook.cli.main import main
from webhook.cli.scan import ScanOptions, run_scan

REPO_ROOT = Path(__file__).resolve().parents[1]


def pod(name: str, namespace: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": name},
        "spec": {
            "containers": [{"name": "c", "image": "cuda:12", "resources": {"limits": limits}}]
        },
        "status": {"phase": "Running"},
    }


def deployment(name: str, namespace: str, gpu: str) -> dict[str, Any]:
    return deployment_of(name, namespace, pod(name, namespace, {"nvidia.com/gpu": gpu})["spec"])


@pytest.fixture
def cluster(cluster_api: FakeApiServer) -> FakeApiServer:
    api = cluster_api
    api.add_namespace("ml", {"team": "ml"})
    for index in range(5):
        api.add_workload("/api/v1/pods", pod(f"web-{index}", "ml", {"cpu": "1"}))
    api.add_workload("/api/v1/pods", pod("quarter", "ml", {"nvidia.com/gpu": "250m"}))
    api.add_workload("/api/v1/pods", pod("odd", "ml", {"nvidia.com/gpu": "1.5"}))
    api.add_workload("/apis/apps/v1/deployments", deployment("serve", "ml", "0.5"))
    return api


def scan(page_size: int, output: str = "table") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    options = ScanOptions(REPO_ROOT / "policies", "kubeconfig", output, page_size)  # type: ignore[arg-type]
    return run_scan(options, stdout=out, stderr=err), out.getvalue(), err.getvalue()


def test_scan_lists_every_kind_page_by_page_and_reports_each_object(
    cluster: FakeApiServer,
) -> None:
    code, out, err = scan(page_size=3, output="json")
    assert code == 1, err  # the 1.5-GPU pod would be denied
    found = {(f["kind"], f["name"]): f for f in json.loads(out)}
    assert found[("Pod", "odd")]["result"] == "denied"
    assert "is not a whole number" in found[("Pod", "odd")]["detail"]
    assert found[("Pod", "quarter")]["result"] == "rewritten"
    assert "example.com/vram=3840" in found[("Pod", "quarter")]["detail"]
    # The shipped pool states no hard limit: every share it gives says so.
    assert "not enforced (hardLimit: None)" in found[("Pod", "quarter")]["detail"]
    assert found[("Deployment", "serve")]["result"] == "rewritten"
    assert found[("Pod", "web-0")]["result"] == "untouched"
    assert len(found) == 8
    assert err.strip() == (
        "8 objects: 1 would be denied, 0 let through by Warn or Audit that Enforce would "
        "deny, 2 rewritten"
    )
    # Every kind listed across namespaces, with the page size; 7 pods at 3 a page: 3 pages,
    # each after the first sent with the token the one before it gave.
    lists = [r for r in cluster.requests() if r.path in WORKLOAD_PATHS]
    assert {r.path for r in lists} == set(WORKLOAD_PATHS)
    assert all(r.method == "GET" and r.query["limit"] == "3" for r in lists)
    pod_pages = [r.query.get("continue", "") for r in lists if r.path == "/api/v1/pods"]
    assert len(pod_pages) == 3 and pod_pages[0] == "" and all(pod_pages[1:])
    assert all(r.token == "test-token" for r in cluster.requests())
    assert not [r for r in cluster.requests() if r.method != "GET"], "scan only reads"


def test_scan_prints_a_table_and_says_what_audit_lets_through_and_enforce_would_deny(
    cluster: FakeApiServer, tmp_path: Path
) -> None:
    (tmp_path / "p").mkdir()
    audit = (
        (REPO_ROOT / "policies" / "default.yaml")
        .read_text()
        .replace("spec:\n", "spec:\n  enforcement: Audit\n", 1)
    )
    (tmp_path / "p" / "default.yaml").write_text(audit)
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["scan", "--cluster", "kubeconfig", "--policies", str(tmp_path / "p")],
        stdout=out,
        stderr=err,
    )
    # A policy in Audit lets the pod through today: the scan says Enforce would deny it, and
    # fails only when told to count that (--strict), as review does.
    assert code == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["KIND", "NAMESPACE/NAME", "RESULT", "POLICY", "DETAIL"]
    odd = next(line for line in lines if "ml/odd" in line)
    assert "would-deny" in odd and "(allowed today: Audit)" in odd
    strict = ["scan", "--cluster", "kubeconfig", "--policies", str(tmp_path / "p"), "--strict"]
    assert main(strict, stdout=io.StringIO(), stderr=io.StringIO()) == 1


def test_scan_lists_each_kind_where_the_cluster_serves_it_and_names_the_rest(
    cluster: FakeApiServer,
) -> None:
    """A v1.20 control plane served CronJobs only in batch/v1beta1: the scan asks discovery
    and lists them there; a kind served nowhere is named, and the rest are scanned."""
    cluster.serve_at("/apis/batch/v1/cronjobs", "/apis/batch/v1beta1/cronjobs")
    cronjob = {
        "apiVersion": "batch/v1beta1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ml"},
        "spec": {
            "schedule": "0 0 * * *",
            "jobTemplate": {"spec": {"template": {"spec": pod("t", "ml", {})["spec"]}}},
        },
    }
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "0.5"}
    }
    cluster.add_workload("/apis/batch/v1beta1/cronjobs", cronjob)
    cluster.serve_at("/api/v1/podtemplates", None)
    code, out, err = scan(page_size=50, output="json")
    found = {(f["kind"], f["name"]): f for f in json.loads(out)}
    assert found[("CronJob", "nightly")]["result"] == "rewritten"
    assert "PodTemplate not scanned: the cluster does not serve it" in err
    assert code == 1  # the 1.5-GPU pod
    paths = {r.path for r in cluster.requests()}
    assert "/apis/batch/v1beta1/cronjobs" in paths and "/apis/batch/v1/cronjobs" not in paths


def test_a_kind_the_cluster_refuses_to_list_is_named_and_the_rest_scanned(
    cluster: FakeApiServer,
) -> None:
    cluster.forbid("list", "deployments")
    code, out, err = scan(page_size=50, output="json")
    kinds = {f["kind"] for f in json.loads(out)}
    assert "Pod" in kinds and "Deployment" not in kinds
    assert "Deployment not scanned: GET /apis/apps/v1/deployments: HTTP 403" in err
    assert "ClusterRole gpu-admission-scan" in err
    # Incomplete, though a pod is denied: what was not listed may hold denials too.
    assert code == 2


def test_a_kind_served_in_two_versions_is_listed_once_in_the_preferred_one(
    cluster: FakeApiServer,
) -> None:
    """Clusters of v1.21 to v1.24 serve CronJobs in batch/v1 (preferred) and batch/v1beta1."""
    cluster.serve_at("/apis/batch/v1/cronjobs", "/apis/batch/v1beta1/cronjobs", also=True)
    code, _, err = scan(page_size=50, output="json")
    assert code == 1, err
    paths = [r.path for r in cluster.requests()]
    assert "/apis/batch/v1/cronjobs" in paths
    assert "/apis/batch/v1beta1/cronjobs" not in paths
    assert not [p for p in paths if p.endswith("/status")], "a subresource is not a list"
    assert paths.count("/apis/batch/v1") == 1, "each group version is asked once"


def test_scan_without_a_cluster_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/config")
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--cluster", "kubeconfig"], stdout=out, stderr=err)
    assert code == 2
    assert err.getvalue().startswith("python -m webhook scan: no cluster to scan: ")


def test_a_scan_the_cluster_forbids_in_part_is_incomplete_and_exits_2(
    cluster: FakeApiServer,
) -> None:
    cluster.forbid("list", "deployments")
    cluster.forbid("list", "pods")  # the one denied object goes with them
    out, err = io.StringIO(), io.StringIO()
    code = main(["scan", "--cluster", "kubeconfig"], stdout=out, stderr=err)
    assert code == 2
    assert "GET /apis/apps/v1/deployments: HTTP 403 deployments.apps is forbidden" in err.getvalue()
    assert "ClusterRole gpu-admission-scan" in err.getvalue()
