"""`gpu-admission sweep-claim-templates` against the fake kube-apiserver: a managed
ResourceClaimTemplate is removed only when no Pod or workload names it, nobody needed it within
the grace, it did not change since it was read, and every kind was read."""

from __future__ import annotations

import io
import time
from typing import Any

import pytest

from tests.support.fake_apiserver import FakeApiServer, RecordedRequest
from tests.support.workload_objects import deployment_of
from webhook.cli.main import main
from webhook.cli.sweep import SweepOptions, run_sweep
from webhook.cli.template_sweep import MIN_GRACE_SECONDS, TEMPLATES_PATH
from webhook.engine.backends.dra_claims import MANAGED_BY, MANAGED_BY_LABEL
from webhook.kube.claim_templates import LAST_NEEDED_ANNOTATION, stamp

HOUR = 3600.0
DEPLOYMENTS = "/apis/apps/v1/deployments"
PODS = "/api/v1/pods"


def template_path(namespace: str, name: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates/{name}"


def claim_template(
    name: str, *, needed_ago: float | None = HOUR, managed: bool = True
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if managed:
        metadata["labels"] = {MANAGED_BY_LABEL: MANAGED_BY}
    if needed_ago is not None:
        metadata["annotations"] = {LAST_NEEDED_ANNOTATION: stamp(time.time() - needed_ago)}
    device = {"deviceClassName": "gpu.nvidia.com"}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": metadata,
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": device}]}}},
    }


def pod_spec(template: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "cuda:12"}]}
    if template is not None:
        spec["resourceClaims"] = [{"name": "gpu-share-c", "resourceClaimTemplateName": template}]
    return spec


def pod(name: str, namespace: str, template: str | None = None) -> dict[str, Any]:
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec(template)}


def deployment(name: str, namespace: str, template: str) -> dict[str, Any]:
    return deployment_of(name, namespace, pod_spec(template))


@pytest.fixture
def cluster(cluster_api: FakeApiServer) -> FakeApiServer:
    cluster_api.add_workload(PODS, pod("web", "ml"))
    return cluster_api


def sweep(*arguments: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["sweep-claim-templates", "--cluster", "kubeconfig", *arguments], stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


def deletes(api: FakeApiServer) -> list[RecordedRequest]:
    return [r for r in api.requests() if r.method == "DELETE"]


def test_a_template_a_deployment_names_is_kept_and_the_same_name_unused_elsewhere_is_removed(
    cluster: FakeApiServer,
) -> None:
    cluster.put_claim_template("ml", claim_template("gpu-share-4096mi-a"))
    unused = cluster.put_claim_template("dev", claim_template("gpu-share-4096mi-a"))
    cluster.add_workload(DEPLOYMENTS, deployment("serve", "ml", "gpu-share-4096mi-a"))
    code, out, err = sweep()
    assert code == 0, err
    assert set(cluster.claim_templates()) == {("ml", "gpu-share-4096mi-a")}
    assert out.splitlines() == [
        "removed ResourceClaimTemplate dev/gpu-share-4096mi-a",
        "2 managed ResourceClaimTemplates: 1 removed, 1 kept, 0 skipped, 0 failed",
    ]
    # Deleted only as the copy it judged: with that copy's resourceVersion.
    [delete] = deletes(cluster)
    assert delete.path == template_path("dev", "gpu-share-4096mi-a")
    version = unused["metadata"]["resourceVersion"]
    assert delete.body["preconditions"] == {"resourceVersion": version}
    assert all(r.token == "test-token" for r in cluster.requests())


def test_a_template_nobody_names_but_needed_within_the_grace_is_kept_and_nothing_else_is_read(
    cluster: FakeApiServer,
) -> None:
    cluster.put_claim_template("ml", claim_template("recent", needed_ago=30))
    # Without the annotation, its creation (just now) is when it was last needed.
    cluster.put_claim_template("ml", claim_template("unstamped", needed_ago=None))
    code, out, err = sweep()
    assert code == 0, err
    assert set(cluster.claim_templates()) == {("ml", "recent"), ("ml", "unstamped")}
    assert out.splitlines()[-1].startswith("2 managed ResourceClaimTemplates: 0 removed, 2 kept")
    # Nothing is past its grace, so no Pod or workload needs listing.
    assert [r.path for r in cluster.requests()] == [TEMPLATES_PATH]


def test_a_template_stamped_between_the_list_and_the_delete_is_kept(
    cluster: FakeApiServer,
) -> None:
    cluster.put_claim_template("ml", claim_template("stale"))
    # An admission needs it again just before the DELETE arrives: its stamp moves the
    # resourceVersion, and the precondition refuses the DELETE.
    cluster.before_next(
        "DELETE",
        template_path("ml", "stale"),
        lambda: cluster.put_claim_template("ml", claim_template("stale", needed_ago=0)),
    )
    code, out, err = sweep()
    assert code == 0, err
    assert ("ml", "stale") in cluster.claim_templates()
    assert len(deletes(cluster)) == 1
    assert out.splitlines() == [
        "1 managed ResourceClaimTemplates: 0 removed, 1 kept, 0 skipped, 0 failed"
    ]


@pytest.mark.parametrize(
    ("unread", "why"),
    [
        (lambda api: api.forbid("list", "deployments"), "Deployment not read, so nothing is "),
        (lambda api: api.serve_at("/api/v1/podtemplates", None), "PodTemplate not read"),
    ],
    ids=["forbidden", "not-served"],
)
def test_a_kind_that_cannot_be_read_stops_every_delete_and_exits_2(
    cluster: FakeApiServer, unread: Any, why: str
) -> None:
    cluster.put_claim_template("ml", claim_template("stale"))
    unread(cluster)
    code, out, err = sweep()
    assert code == 2
    assert why in err
    assert "skipped ResourceClaimTemplate ml/stale: not removed while " in err
    assert not deletes(cluster)
    assert ("ml", "stale") in cluster.claim_templates()
    assert "1 managed ResourceClaimTemplates: 0 removed, 0 kept, 1 skipped" in out


def test_a_forbidden_list_names_the_role_to_bind(cluster: FakeApiServer) -> None:
    cluster.put_claim_template("ml", claim_template("stale"))
    cluster.forbid("list", "deployments")
    _, _, err = sweep()
    assert "GET /apis/apps/v1/deployments: HTTP 403 deployments.apps is forbidden" in err
    assert "ClusterRole gpu-claim-template-sweep" in err


def test_a_dry_run_deletes_nothing_and_says_what_it_would_remove(cluster: FakeApiServer) -> None:
    cluster.put_claim_template("ml", claim_template("stale"))
    code, out, err = sweep("--dry-run")
    assert code == 0, err
    assert out.splitlines()[0] == "would remove ResourceClaimTemplate ml/stale"
    assert "1 would be removed" in out
    assert not deletes(cluster)
    assert ("ml", "stale") in cluster.claim_templates()


def test_templates_without_the_managed_by_label_are_never_touched(cluster: FakeApiServer) -> None:
    cluster.put_claim_template("ml", claim_template("theirs", managed=False))
    other = claim_template("someone-elses")
    other["metadata"]["labels"] = {MANAGED_BY_LABEL: "another-tool"}
    cluster.put_claim_template("ml", other)
    code, _, err = sweep()
    assert code == 0, err
    assert set(cluster.claim_templates()) == {("ml", "theirs"), ("ml", "someone-elses")}
    assert not deletes(cluster)
    [listing] = [r for r in cluster.requests() if r.path == TEMPLATES_PATH]
    assert listing.query["labelSelector"] == f"{MANAGED_BY_LABEL}={MANAGED_BY}"


def test_an_object_on_a_later_page_still_keeps_its_template(cluster: FakeApiServer) -> None:
    cluster.put_claim_template("ml", claim_template("named-late"))
    cluster.put_claim_template("ml", claim_template("unused"))
    for index in range(4):
        cluster.add_workload(PODS, pod(f"filler-{index}", "ml"))
    cluster.add_workload(PODS, pod("last", "ml", "named-late"))
    out, err = io.StringIO(), io.StringIO()
    options = SweepOptions(mode="kubeconfig", page_size=2)
    assert run_sweep(options, stdout=out, stderr=err) == 0, err.getvalue()
    assert set(cluster.claim_templates()) == {("ml", "named-late")}
    # Six pods at two a page: three pages, each after the first with the token before it.
    pages = [r.query.get("continue", "") for r in cluster.requests() if r.path == PODS]
    assert len(pages) == 3 and pages[0] == "" and all(pages[1:])


def test_a_cluster_that_serves_no_claim_templates_has_none_to_sweep(
    cluster: FakeApiServer,
) -> None:
    """A cluster before 1.34 answers 404 for resource.k8s.io/v1: the CronJob of deploy/base
    must not fail there every ten minutes."""
    cluster.claim_templates_served = False
    code, out, err = sweep()
    assert code == 0, err
    assert out == "the cluster serves no resource.k8s.io/v1 ResourceClaimTemplates: none to sweep\n"
    assert [r.path for r in cluster.requests()] == [TEMPLATES_PATH]


def test_a_grace_shorter_than_an_admission_may_take_is_refused(cluster: FakeApiServer) -> None:
    assert MIN_GRACE_SECONDS == 120  # as --help says
    code, _, err = sweep("--grace", "60")
    assert code == 2
    assert "--grace 60 is shorter than 120 seconds" in err
    # Not a number: every age would compare as past it.
    assert sweep("--grace", "nan")[0] == 2
    assert not cluster.requests()


def test_a_sweep_without_a_cluster_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/config")
    code, _, err = sweep()
    assert code == 2
    assert err.startswith("python -m webhook sweep-claim-templates: no cluster to sweep: ")
