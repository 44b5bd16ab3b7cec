"""The advertiser as a large cluster meets it: a node list in pages, a busy apiserver's 429s, and
a policy edit that reads a label the nodes were not kept with. Against the fake apiserver; the
figures at 1,000 to 100,000 nodes are the benchmark's (bench/node_scale.py), not a test's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.fake_apiserver import FakeApiServer, RecordedRequest
from tests.support.waiting import eventually
from tests.test_advertise import (
    Replica,
    advertise,
    capacity,
    copy_policies,
    node_from,
    patches,
)
from webhook.kube.paged_list import PAGE_SIZE

pytestmark = pytest.mark.usefixtures("no_proxy")

NODES = PAGE_SIZE * 2 + 100


@pytest.fixture
def big_api() -> FakeApiServer:
    server = FakeApiServer()
    for index in range(NODES):
        node = node_from("nvidia-a10g-aws-g5-2xlarge", f"a10g-{index:04d}", pooled=index % 2 == 0)
        server.add_node(node)
    return server


def test_one_pass_lists_the_nodes_in_pages_and_patches_every_pool_node(
    big_api: FakeApiServer, tmp_path: Path
) -> None:
    with big_api:
        kubeconfig = big_api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = advertise({"KUBECONFIG": str(kubeconfig)}, "--once")
        assert code == 0, err
        assert out.strip().endswith(f"patched {NODES // 2}, skipped 0, failed 0")
        pooled = [f"a10g-{index:04d}" for index in range(0, NODES, 2)]
        assert all(capacity(big_api, name) == "23028" for name in pooled)
        assert all(capacity(big_api, f"a10g-{index:04d}") is None for index in range(1, NODES, 2))
        lists = node_lists(big_api)
        assert [r.query.get("limit") for r in lists] == [str(PAGE_SIZE)] * 3
        tokens = [r.query.get("continue", "") for r in lists]
        assert tokens[0] == "" and all(tokens[1:]) and len(set(tokens)) == 3
        # A list from resourceVersion 0 is served whole from the watch cache: never asked.
        assert all("resourceVersion" not in r.query for r in lists)


def test_a_list_whose_continue_token_expired_starts_again_from_the_first_page(
    big_api: FakeApiServer, tmp_path: Path
) -> None:
    with big_api:
        # etcd compacts between the first page and the second.
        big_api.before_next(
            "GET",
            "/api/v1/nodes",
            lambda: big_api.before_next("GET", "/api/v1/nodes", big_api.expire_list_snapshots),
        )
        kubeconfig = big_api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = advertise({"KUBECONFIG": str(kubeconfig)}, "--once")
        assert code == 0, err
        assert out.strip().startswith(f"{NODES} nodes: ")
        assert out.strip().endswith(f"patched {NODES // 2}, skipped 0, failed 0")
        tokens = [r.query.get("continue", "") for r in node_lists(big_api)]
        # The expired token, then the whole list again from its first page.
        assert tokens[0] == "" and tokens[1] and tokens[2] == "" and len(tokens) == 5


def test_a_too_many_requests_answer_pauses_the_patch_and_it_is_sent_again(
    tmp_path: Path,
) -> None:
    with FakeApiServer() as api:
        api.add_node(node_from("nvidia-tesla-t4-baremetal"))
        api.throttle_patches(2, retry_after=1)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = advertise({"KUBECONFIG": str(kubeconfig)}, "--once")
        assert code == 0, err
        assert out.strip().endswith("patched 1, skipped 0, failed 0")
        assert capacity(api, "t4-node1") == "15360"
        sent = [r for r in patches(api) if r.path.endswith("/t4-node1/status")]
        assert len(sent) == 3 and all(r.body == sent[0].body for r in sent)


def test_a_patch_refused_more_often_than_the_retries_fails_the_pass(tmp_path: Path) -> None:
    from webhook.nodes.status_patches import TOO_MANY_RETRIES

    with FakeApiServer() as api:
        api.add_node(node_from("nvidia-tesla-t4-baremetal"))
        api.throttle_patches(TOO_MANY_RETRIES + 1, retry_after=0)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        code, out, err = advertise({"KUBECONFIG": str(kubeconfig)}, "--once")
        assert code == 1
        assert "node t4-node1: the patch failed (HTTP 429" in err
        assert out.strip().endswith("patched 0, skipped 0, failed 1")
        assert len(patches(api)) == TOO_MANY_RETRIES + 1


def test_a_policy_that_comes_to_read_another_label_lists_the_nodes_again(
    tmp_path: Path,
) -> None:
    team = "team.example.com/gpu-share"
    with FakeApiServer(token="t") as api:
        labelled = node_from("nvidia-tesla-t4-baremetal", pooled=False)
        labelled["metadata"]["labels"][team] = "yes"
        api.add_node(labelled)
        api.add_node(node_from("nvidia-a10g-aws-g5-2xlarge"))
        policies = copy_policies(tmp_path / "policies")
        policy_file = policies / "default.yaml"
        replica = Replica(api, policies, "advertiser-a", tmp_path / "a.log")
        try:
            eventually(lambda: capacity(api, "a10g-g5-2xlarge") == "23028", timeout=15)
            assert capacity(api, "t4-node1") is None
            lists_before = len(node_lists(api))
            # The pool moves to a label the nodes were not kept with.
            policy = yaml.safe_load(policy_file.read_text())
            policy["spec"]["sharing"]["nodes"]["selector"]["matchLabels"] = {team: "yes"}
            policy_file.write_text(yaml.safe_dump(policy))
            eventually(lambda: capacity(api, "t4-node1") == "15360", timeout=15)
            eventually(lambda: capacity(api, "a10g-g5-2xlarge") is None, timeout=5)
            assert len(node_lists(api)) > lists_before
            assert "listing the nodes again" in replica.output()
        finally:
            code = replica.stop()
        assert code == 0, replica.output()


def node_lists(api: FakeApiServer) -> list[RecordedRequest]:
    return [
        r
        for r in api.requests()
        if r.path == "/api/v1/nodes" and r.method == "GET" and not r.is_watch
    ]
