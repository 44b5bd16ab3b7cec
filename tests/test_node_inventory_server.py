"""The real server reads the nodes' MIG profiles from the Kubernetes API once it serves a
MIG policy, and gives a share the smallest profile the nodes of its model advertise."""

from __future__ import annotations

import base64
import copy
import json
import time
from pathlib import Path
from typing import Any

from tests.support.fake_apiserver import FakeApiServer
from tests.support.server import FRACTIONAL_POD_REVIEW, REPO_ROOT, WebhookServer

DEADLINE_SECONDS = 15
NO_PROXY = {name: "" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
A100 = "NVIDIA-A100-SXM4-40GB"


def five_gib_review() -> dict[str, Any]:
    review = json.loads(FRACTIONAL_POD_REVIEW.read_text())
    container = review["request"]["object"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"example.com/vram": "5Gi"}}
    return review


def a100(name: str, **allocatable: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": A100}},
        "status": {"capacity": {"cpu": "8", **allocatable}},
    }


def profiles_given(server: WebhookServer, review: dict[str, Any]) -> set[str]:
    client = server.client()
    try:
        reply = client.post_json("/mutate", review)
    finally:
        client.close()
    response = reply.json()["response"]
    assert response["allowed"] is True, response
    patch = json.loads(base64.b64decode(response["patch"]))
    return {
        op["path"].rsplit("/", 1)[1].replace("~1", "/")
        for op in patch
        if "/limits/" in op["path"] and op["op"] == "add"
    }


def test_a_mig_share_gets_the_smallest_profile_the_nodes_advertise(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    example = REPO_ROOT / "examples" / "policies" / "mig" / "policy.yaml"
    (policies / "mig.yaml").write_text(example.read_text())
    with FakeApiServer(token="node-token") as api:
        # The catalogue's choice for 5 GiB is 1g.10gb; these nodes offer 1g.5gb and 3g.20gb.
        api.add_node(a100("gpu-1", **{"nvidia.com/mig-1g.5gb": "7"}))
        api.add_node(a100("gpu-2", **{"nvidia.com/mig-3g.20gb": "2"}))
        kubeconfig = api.write_kubeconfig(tmp_path / "kube" / "config")
        environment = {"NODE_INVENTORY": "kubeconfig", "KUBECONFIG": str(kubeconfig), **NO_PROXY}
        server = WebhookServer(policies, tmp_path / "certs", tmp_path / "gunicorn.log", environment)
        server.start()
        try:
            review = five_gib_review()
            deadline = time.monotonic() + DEADLINE_SECONDS
            given: list[set[str]] = []
            # Each worker lists the nodes on its own: ask until several answers agree.
            while time.monotonic() < deadline and given[-4:] != [{"nvidia.com/mig-3g.20gb"}] * 4:
                given.append(profiles_given(server, copy.deepcopy(review)))
                time.sleep(0.05)
            assert given[-4:] == [{"nvidia.com/mig-3g.20gb"}] * 4, (given, server.log()[-3000:])
            node_reads = [r for r in api.requests() if r.path == "/api/v1/nodes"]
            assert node_reads and all(r.method == "GET" for r in node_reads), api.requests()
            assert any(r.is_watch for r in node_reads) and any(not r.is_watch for r in node_reads)

            # A node partitioned anew: the smaller profile that holds 5 GiB is chosen from then.
            api.add_node(a100("gpu-3", **{"nvidia.com/mig-2g.10gb": "3"}))
            deadline = time.monotonic() + DEADLINE_SECONDS
            while time.monotonic() < deadline and given[-4:] != [{"nvidia.com/mig-2g.10gb"}] * 4:
                given.append(profiles_given(server, copy.deepcopy(review)))
                time.sleep(0.05)
            assert given[-4:] == [{"nvidia.com/mig-2g.10gb"}] * 4, (given, server.log()[-3000:])
        finally:
            server.stop()
