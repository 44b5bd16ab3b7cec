"""`python -m webhook advertise` against a fake of the node, Lease and Event endpoints: the exact
requests it sends, what it prints, and how it fails. The one-pass modes run in this process; the
service runs as real processes (two of them for the lease), stopped by signals."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.fake_apiserver import JSON_PATCH, FakeApiServer, RecordedRequest
from tests.support.waiting import eventually
from webhook.cli.main import main

pytestmark = pytest.mark.usefixtures("no_proxy")

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "node-labels"
TOKEN = "advertiser-token"
POOL = "gpu-admission.example.com/memory-sharing"
VRAM = "example.com/vram"
LEADER = "gpu_vram_advertiser_leader"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/gpu-admission/leases/gpu-vram-advertiser"


def node_from(fixture: str, name: str | None = None, *, pooled: bool = True) -> dict[str, Any]:
    node: dict[str, Any] = yaml.safe_load((FIXTURES / f"{fixture}.yaml").read_text())
    if name is not None:
        node["metadata"]["name"] = name
    if pooled:
        node["metadata"]["labels"][POOL] = "true"
    # A real node carries what the kubelet reports besides GPUs.
    status = node.setdefault("status", {})
    status["capacity"] = {"cpu": "8", "memory": "32Gi", **status.get("capacity", {})}
    status["allocatable"] = {"cpu": "7800m", "memory": "31Gi", **status.get("allocatable", {})}
    return node


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        server.add_node(node_from("nvidia-tesla-t4-baremetal"))
        server.add_node(node_from("nvidia-a10-vm", pooled=False))
        yield server


@pytest.fixture
def environ(api: FakeApiServer, tmp_path: Path) -> dict[str, str]:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    return {"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}


def advertise(environ: dict[str, str], *args: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    old = dict(os.environ)
    os.environ.update(environ)
    try:
        code = main(
            ["advertise", "--policies", str(REPO_ROOT / "policies"), *args],
            stdout=stdout,
            stderr=stderr,
        )
    finally:
        os.environ.clear()
        os.environ.update(old)
    return code, stdout.getvalue(), stderr.getvalue()


def patches(api: FakeApiServer) -> list[RecordedRequest]:
    return [r for r in api.requests() if r.method == "PATCH"]


def t4_patch(api: FakeApiServer) -> list[dict[str, str]]:
    """The patch the T4 node gets: it tests the version it was planned on first."""
    version = api.node("t4-node1")["metadata"]["resourceVersion"]
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "add", "path": "/status/capacity/example.com~1vram", "value": "15360"},
        {"op": "add", "path": "/status/allocatable/example.com~1vram", "value": "15360"},
    ]


def test_dry_run_prints_each_patch_and_sends_none(
    api: FakeApiServer, environ: dict[str, str]
) -> None:
    code, out, err = advertise(environ, "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    assert json.loads(lines[0]) == {"node": "t4-node1", "patch": t4_patch(api)}
    assert (
        lines[-1] == "2 nodes: example.com/vram on 1 advertised; would patch 1, skipped 0, failed 0"
    )
    assert [r.method for r in api.requests()] == ["GET"]
    assert VRAM not in api.node("t4-node1")["status"]["capacity"]


def test_once_patches_the_status_subresource_with_a_json_patch(
    api: FakeApiServer, environ: dict[str, str]
) -> None:
    expected = t4_patch(api)
    code, out, err = advertise(environ, "--once")
    assert code == 0, err
    (sent,) = patches(api)
    assert sent.path == "/api/v1/nodes/t4-node1/status"
    assert sent.content_type == JSON_PATCH
    assert sent.body == expected
    status = api.node("t4-node1")["status"]
    assert status["capacity"] == {
        "cpu": "8",
        "memory": "32Gi",
        "nvidia.com/gpu": "1",
        VRAM: "15360",
    }
    assert status["allocatable"][VRAM] == "15360" and status["allocatable"]["cpu"] == "7800m"
    assert (
        "node t4-node1: example.com/vram=15360 (1 x nvidia.com/gpu.memory=15360 MiB, in MiB)" in err
    )
    # A node that did not change gets no patch the next time.
    code, out, _ = advertise(environ, "--once")
    assert code == 0 and len(patches(api)) == 1
    assert out.endswith("patched 0, skipped 0, failed 0\n")


def test_once_records_an_event_about_each_node_it_changes(
    api: FakeApiServer, environ: dict[str, str]
) -> None:
    advertise(environ, "--once")
    (event,) = api.events()
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {
        "kind": "Node",
        "apiVersion": "v1",
        "name": "t4-node1",
        "uid": "t4-node1",
    }
    assert (event["type"], event["reason"]) == ("Normal", "VRAMAdvertised")
    assert "example.com/vram=15360" in event["message"]


def test_a_node_that_leaves_the_pool_loses_the_resource(
    api: FakeApiServer, environ: dict[str, str]
) -> None:
    advertise(environ, "--once")
    api.change_node("t4-node1", lambda node: node["metadata"]["labels"].pop(POOL))
    code, _, err = advertise(environ, "--once")
    assert code == 0, err
    assert patches(api)[-1].body[1:] == [
        {"op": "remove", "path": "/status/capacity/example.com~1vram"},
        {"op": "remove", "path": "/status/allocatable/example.com~1vram"},
    ]
    assert VRAM not in api.node("t4-node1")["status"]["allocatable"]
    assert "example.com/vram removed (in no policy's node pool)" in err


def test_unreadable_labels_skip_the_node_by_name_and_exit_1(
    api: FakeApiServer, environ: dict[str, str]
) -> None:
    api.add_node(node_from("nvidia-l40s-vm"))
    code, out, err = advertise(environ, "--once")
    assert code == 1
    assert "node l40s-vm-node: skipped: labels unreadable: nvidia.com/gpu.count is missing" in err
    assert "skipped 1" in out
    assert [r.path for r in patches(api)] == ["/api/v1/nodes/t4-node1/status"]


def test_multi_gpu_nodes_are_left_out_and_warned_of(
    api: FakeApiServer, environ: dict[str, str]
) -> None:
    api.add_node(node_from("nvidia-h100-80gb-hbm3-x8-xe9680"))
    code, _, err = advertise(environ, "--once")
    assert code == 0
    assert (
        'node h100-xe9680-node: policy "default": 8 cards, and the policy\'s nodes.multiGPU is Skip'
        in err
    )
    assert VRAM not in api.node("h100-xe9680-node")["status"]["capacity"]


@pytest.mark.parametrize(
    ("verb", "resource", "message"),
    [
        (
            "patch",
            "nodes/status",
            'cannot patch nodes/status: HTTP 403 nodes "t4-node1" is forbidden: User',
        ),
        ("list", "nodes", "cannot list nodes: HTTP 403 nodes is forbidden: User"),
    ],
)
def test_missing_rbac_names_the_verb_and_the_resource(
    api: FakeApiServer, environ: dict[str, str], verb: str, resource: str, message: str
) -> None:
    api.forbid(verb, resource)
    code, _, err = advertise(environ, "--once")
    assert code == 2
    assert message in err
    assert f'cannot {verb} resource "{resource}" in API group "" at the cluster scope' in err
    assert f"grant the verb{'s get, list and watch' if verb == 'list' else ' patch'} on" in err


def test_an_unreachable_api_is_said_plainly(api: FakeApiServer, environ: dict[str, str]) -> None:
    api.stop()
    code, _, err = advertise(environ, "--once")
    assert code == 2
    assert f"the Kubernetes API at {api.url} did not answer: connection refused" in err


def test_refused_events_do_not_stop_the_patches(
    api: FakeApiServer, environ: dict[str, str]
) -> None:
    api.forbid("create", "events")
    code, _, err = advertise(environ, "--once")
    assert code == 0
    assert api.node("t4-node1")["status"]["capacity"][VRAM] == "15360"
    assert "events about nodes cannot be recorded" in err


def test_a_policy_directory_that_does_not_load_needs_no_cluster(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "apiVersion: gpu-admission.example.com/v1alpha1\nkind: GPUPolicy\n"
    )
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["advertise", "--once", "--policies", str(tmp_path)], stdout=stdout, stderr=stderr)
    assert code == 2
    assert f"the policies in {tmp_path} do not load:" in stderr.getvalue()


# --- the service ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Replica:
    """`python -m webhook advertise` as its Deployment runs it, in a process of its own."""

    def __init__(
        self,
        api: FakeApiServer,
        policies: Path,
        name: str,
        log: Path,
        *,
        lease_seconds: int = 3,
        resync_seconds: float = 300,
    ) -> None:
        self.port = free_port()
        self.log = log
        # A token of its own, so that what it asked is told apart from the other replica's.
        self.token = f"token-{name}"
        kubeconfig = api.write_kubeconfig(log.with_suffix(".kubeconfig"), self.token)
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "POD_NAME": name,
            "POD_NAMESPACE": "gpu-admission",
        }
        for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            env.pop(proxy, None)
        command = [
            sys.executable,
            "-m",
            "webhook",
            "advertise",
            "--policies",
            str(policies),
            "--metrics-bind",
            f"127.0.0.1:{self.port}",
            "--lease-seconds",
            str(lease_seconds),
            "--resync-seconds",
            str(resync_seconds),
        ]
        self._log_file = log.open("w")
        self.process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=self._log_file, stderr=subprocess.STDOUT
        )

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as answer:
            return str(answer.read().decode())

    def metric(self, sample: str) -> float | None:
        try:
            text = self.get("/metrics")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
        return None

    def asked(self, api: FakeApiServer) -> list[RecordedRequest]:
        return [r for r in api.requests() if r.token == self.token]

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(10)
        self._log_file.close()
        return code

    def output(self) -> str:
        return self.log.read_text()


def capacity(api: FakeApiServer, node: str) -> str | None:
    return api.node(node)["status"]["capacity"].get(VRAM)


def test_the_service_keeps_nodes_advertised_through_resets_and_changes(
    api: FakeApiServer, tmp_path: Path
) -> None:
    policies = copy_policies(tmp_path / "policies")
    policy_file = policies / "default.yaml"
    # No resync within the test: every change must be answered by the watch or the reload.
    replica = Replica(api, policies, "advertiser-a", tmp_path / "a.log", resync_seconds=300)
    try:
        eventually(lambda: capacity(api, "t4-node1") == "15360", timeout=15)
        assert eventually(lambda: replica.get("/healthz") == "ok\n")
        # A kubelet that re-registers zeroes extended resources: answered from the watch.
        api.change_node("t4-node1", lambda n: n["status"]["capacity"].update({VRAM: "0"}))
        eventually(lambda: capacity(api, "t4-node1") == "15360", timeout=5)
        # A node that joins the pool later.
        api.add_node(node_from("nvidia-a10g-aws-g5-2xlarge"))
        eventually(lambda: capacity(api, "a10g-g5-2xlarge") == "23028", timeout=5)
        # A policy edit that moves the unit to GiB re-sizes every node in the pool.
        policy_file.write_text(policy_file.read_text().replace("unit: MiB", "unit: GiB"))
        eventually(lambda: capacity(api, "t4-node1") == "15", timeout=10)
        eventually(lambda: capacity(api, "a10g-g5-2xlarge") == "22", timeout=5)
        nodes = 'gpu_vram_advertiser_nodes_advertised{resource="example.com/vram"}'
        assert eventually(lambda: replica.metric(nodes) == 2.0)
        applied = 'gpu_vram_advertiser_patches_total{result="applied"}'
        assert eventually(lambda: replica.metric(applied) == 5.0)
        assert replica.metric(LEADER) == 1.0
        lease = api.leases()[("gpu-admission", "gpu-vram-advertiser")]
        assert lease["spec"]["holderIdentity"] == "advertiser-a"
        assert lease["spec"]["leaseDurationSeconds"] == 3
        # A resource no policy names any more leaves every node.
        renamed = policy_file.read_text().replace("example.com/vram", "example.com/vram-gib")
        policy_file.write_text(renamed)
        eventually(lambda: capacity(api, "t4-node1") is None, timeout=10)
        eventually(lambda: api.node("t4-node1")["status"]["capacity"].get(VRAM + "-gib") == "15")
        assert eventually(lambda: replica.metric(nodes) is None)
        # Every write is a JSON patch of a node's status, never of anything else of the node.
        node_writes = [r for r in api.requests() if r.method != "GET" and "/nodes/" in r.path]
        assert {(r.method, r.content_type) for r in node_writes} == {("PATCH", JSON_PATCH)}
        assert all(r.path.endswith("/status") for r in node_writes)
    finally:
        code = replica.stop()
    assert code == 0, replica.output()
    assert "nodes: SIGTERM, stopping" in replica.output()
    # The lease is handed back, so that another replica need not wait for it to run out.
    assert api.leases()[("gpu-admission", "gpu-vram-advertiser")]["spec"]["holderIdentity"] == ""


def test_two_replicas_patch_one_at_a_time_and_the_second_takes_over(
    api: FakeApiServer, tmp_path: Path
) -> None:
    first = Replica(api, copy_policies(tmp_path / "p1"), "advertiser-a", tmp_path / "a.log")
    second = Replica(api, copy_policies(tmp_path / "p2"), "advertiser-b", tmp_path / "b.log")
    try:
        eventually(lambda: capacity(api, "t4-node1") == "15360", timeout=15)
        leader, follower = (first, second) if first.metric(LEADER) == 1.0 else (second, first)
        assert eventually(lambda: leader.metric(LEADER) == 1.0 and follower.metric(LEADER) == 0.0)
        # A reset while both run: the leader mends it, the follower neither watches nor patches.
        api.change_node("t4-node1", lambda n: n["status"]["capacity"].update({VRAM: "0"}))
        eventually(lambda: capacity(api, "t4-node1") == "15360", timeout=5)
        asked = {(r.method, r.path) for r in follower.asked(api)}
        assert asked <= {
            ("GET", "/api/v1/nodes"),  # the check, with limit=1, that it may list nodes
            ("GET", LEASE_PATH),
            ("POST", LEASE_PATH.rsplit("/", 1)[0]),
            ("PUT", LEASE_PATH),
        }, asked
        assert not [r for r in follower.asked(api) if r.is_watch or r.method == "PATCH"]
        # The leader goes away without a word; its lease runs out and the follower takes over.
        leader.stop(signal.SIGKILL)
        api.change_node("t4-node1", lambda n: n["status"]["capacity"].update({VRAM: "0"}))
        eventually(lambda: capacity(api, "t4-node1") == "15360", timeout=15)
        assert follower.metric(LEADER) == 1.0
        lease = api.leases()[("gpu-admission", "gpu-vram-advertiser")]
        assert lease["spec"]["holderIdentity"] == follower.token.removeprefix("token-")
        assert lease["spec"]["leaseTransitions"] >= 1
    finally:
        for replica in (first, second):
            replica.stop(signal.SIGKILL)


def test_a_stopped_leader_hands_the_lease_over_at_once(api: FakeApiServer, tmp_path: Path) -> None:
    # A 30 s lease: only a release lets the second replica lead within the test's time.
    first = Replica(
        api, copy_policies(tmp_path / "p1"), "advertiser-a", tmp_path / "a.log", lease_seconds=30
    )
    eventually(lambda: first.metric(LEADER) == 1.0, timeout=15)
    second = Replica(
        api, copy_policies(tmp_path / "p2"), "advertiser-b", tmp_path / "b.log", lease_seconds=30
    )
    try:
        assert eventually(lambda: second.metric(LEADER) == 0.0, timeout=10)
        assert first.stop() == 0
        assert eventually(lambda: second.metric(LEADER) == 1.0, timeout=10)
    finally:
        second.stop(signal.SIGKILL)


@pytest.mark.parametrize(
    ("verb", "resource", "message"),
    [
        (
            "patch",
            "nodes/status",
            'cannot patch nodes/status: HTTP 403 nodes "t4-node1" is forbidden',
        ),
        (
            "get",
            "leases",
            "cannot get leases.coordination.k8s.io gpu-vram-advertiser in namespace "
            'gpu-admission: HTTP 403 leases.coordination.k8s.io "gpu-vram-advertiser" is '
            "forbidden",
        ),
    ],
)
def test_the_service_stops_when_rbac_refuses(
    api: FakeApiServer, tmp_path: Path, verb: str, resource: str, message: str
) -> None:
    api.forbid(verb, resource)
    replica = Replica(api, copy_policies(tmp_path / "p"), "advertiser-a", tmp_path / "a.log")
    code = replica.process.wait(20)
    replica.stop()
    assert code == 2, replica.output()
    assert message in replica.output()
    assert "Traceback" not in replica.output()


def copy_policies(directory: Path) -> Path:
    directory.mkdir()
    (directory / "default.yaml").write_text((REPO_ROOT / "policies" / "default.yaml").read_text())
    return directory
