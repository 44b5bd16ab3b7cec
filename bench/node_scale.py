"""The node side at cluster scale: `python -m bench.node_scale [--sizes 1000,10000,100000]`.

For each size, a fake API (tests/support/fake_apiserver.py, in a process of its own) serves that
many nodes, half of them labelled into the shipped policy's pool, each as large on the wire as a
GPU node of a real cluster (the labels GPU feature discovery writes on an AWS g5, the kubelet's
50 images, conditions and addresses: about 11 KiB). Then, each in a fresh process:

- `python -m webhook advertise --once` twice: the first pass patches every pool node, the second
  finds nothing to change. Its wall time, its patches a second and its peak RSS (the kernel's
  high-water mark) are the figures.
- the webhook's node inventory (NODE_INVENTORY, for MIG shares) until its first list is in.

Each status patch is answered 5 ms late, as an etcd write makes a real apiserver answer; the
fake runs on the same cores as what it serves, so a figure here is a ceiling of the machine
more than of the advertiser: its own CPU time is reported beside its wall time.

The baseline in the same run: the first pass at the middle size with one patch in flight and
no rate limit, which is how the advertiser patched before it sent them in parallel. Memory per
node is the peak at the largest size less the peak at the smallest, over the nodes between.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
SIZES = (1_000, 10_000, 100_000)
POOL_LABEL = ("gpu-admission.example.com/memory-sharing", "true")
NODE_FIXTURE = REPO_ROOT / "tests/fixtures/node-labels/nvidia-a10g-aws-g5-2xlarge.yaml"
# What every node carries besides its GPU labels, as the kubelet and the cloud write them.
NODE_LABELS = {
    "beta.kubernetes.io/arch": "amd64",
    "beta.kubernetes.io/instance-type": "g5.2xlarge",
    "beta.kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    "kubernetes.io/os": "linux",
    "node.kubernetes.io/instance-type": "g5.2xlarge",
    "topology.kubernetes.io/region": "us-east-1",
    "topology.kubernetes.io/zone": "us-east-1a",
    "feature.node.kubernetes.io/cpu-model.vendor_id": "AMD",
    "feature.node.kubernetes.io/kernel-version.full": "6.1.112-124.190.amzn2023.x86_64",
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/system-os_release.ID": "amzn",
}
KUBELET_IMAGES = 50  # the kubelet's nodeStatusMaxImages
WAIT_SECONDS = 900
# A patch on a real apiserver waits for etcd: one at a time, a patch took 6.7 ms on loopback
# (the measurement: 150 a second), of which this is the server's part.
WRITE_LATENCY = 0.005


# --- the fake API's process ----------------------------------------------------------------


@functools.cache
def node_fixture() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(NODE_FIXTURE.read_text())
    return loaded


def node_manifest(index: int, in_pool: bool) -> dict[str, Any]:
    fixture = node_fixture()
    name = f"gpu-node-{index:06d}"
    labels = {**NODE_LABELS, **fixture["metadata"]["labels"], "kubernetes.io/hostname": name}
    if in_pool:
        labels[POOL_LABEL[0]] = POOL_LABEL[1]
    capacity = {
        "cpu": "8",
        "ephemeral-storage": "524275692Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "32386544Ki",
        "nvidia.com/gpu": "1",
        "pods": "58",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                **fixture["metadata"].get("annotations", {}),
            },
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{index:017x}"},
        "status": {
            "capacity": capacity,
            "allocatable": {**capacity, "cpu": "7910m", "memory": "31369712Ki"},
            "addresses": [
                {
                    "type": "InternalIP",
                    "address": f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}",
                },
                {"type": "Hostname", "address": name},
            ],
            "conditions": [
                {
                    "type": kind,
                    "status": "True" if kind == "Ready" else "False",
                    "lastHeartbeatTime": "2026-11-27T10:00:00Z",
                    "lastTransitionTime": "2026-11-20T10:00:00Z",
                    "reason": f"Kubelet{kind}",
                    "message": f"kubelet reports {kind}",
                }
                for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.112-124.190.amzn2023.x86_64",
                "kubeProxyVersion": "v1.34.1",
                "kubeletVersion": "v1.34.1",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.6.20241212",
            },
        },
    }


def kubelet_images() -> list[dict[str, Any]]:
    """Fifty images as the kubelet reports them: a digest name and a tag name, and a size."""
    return [
        {
            "names": [
                f"registry.example.com/team-{i % 7}/image-{i}@sha256:{i:064x}",
                f"registry.example.com/team-{i % 7}/image-{i}:v1.{i}.0",
            ],
            "sizeBytes": 180_000_000 + i * 1_000_003,
        }
        for i in range(KUBELET_IMAGES)
    ]


def serve(count: int, kubeconfig: Path) -> None:
    """Serve `count` nodes until stdin closes; print `ready` once the kubeconfig is written."""
    sys.path.insert(0, str(REPO_ROOT))
    from tests.support.fake_apiserver import FakeApiServer

    api = FakeApiServer()
    api.node_padding = kubelet_images()
    api.history_limit = 1000
    api.write_latency = WRITE_LATENCY
    for index in range(count):
        api.add_node(node_manifest(index, in_pool=index % 2 == 0))
    api.start()
    api.write_kubeconfig(kubeconfig)
    print("ready", flush=True)
    sys.stdin.read()
    api.stop()


class FakeCluster:
    def __init__(self, count: int, workdir: Path) -> None:
        self.count = count
        self.kubeconfig = workdir / f"kubeconfig-{count}"
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.node_scale", "--serve", str(count), str(self.kubeconfig)],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != "ready":
            self.stop()
            raise RuntimeError(f"the fake API of {count} nodes did not start")

    def stop(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


# --- the measured processes ------------------------------------------------------------------


def measured(command: Sequence[str], kubeconfig: Path) -> dict[str, Any]:
    """Run `command` against the fake API: its seconds, peak RSS, exit code and standard output."""
    environment = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=environment, stdout=out, stderr=err)
        try:
            _, status, usage = _wait4(process.pid, WAIT_SECONDS)
        finally:
            process.returncode = 0  # reaped by wait4
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        return {
            "seconds": round(seconds, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            "exit_code": os.waitstatus_to_exitcode(status),
            "stdout": out.read().decode(errors="replace"),
            "stderr_tail": err.read().decode(errors="replace")[-2000:],
        }


def _wait4(pid: int, timeout: float) -> tuple[int, int, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found, status, usage = os.wait4(pid, os.WNOHANG)
        if found:
            return found, status, usage
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.wait4(pid, 0)
        time.sleep(0.05)


SUMMARY = re.compile(r"^(?P<nodes>\d+) nodes: .*; (?:would patch|patched) (?P<patched>\d+), ")


def advertise(kubeconfig: Path, *extra: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "webhook", "advertise", "--once", "--policies", "policies"]
    run = measured([*command, *extra], kubeconfig)
    found = SUMMARY.search(run["stdout"].strip().splitlines()[-1] if run["stdout"].strip() else "")
    run["nodes"] = int(found["nodes"]) if found else None
    run["patched"] = int(found["patched"]) if found else None
    if run["patched"]:
        run["patches_per_second"] = round(run["patched"] / run["seconds"], 1)
    run["error_count"] = 0 if run["exit_code"] == 0 and found else 1
    return run


def inventory(kubeconfig: Path) -> dict[str, Any]:
    run = measured([sys.executable, "-m", "bench.node_scale", "--inventory"], kubeconfig)
    with contextlib.suppress(ValueError):
        run.update(json.loads(run["stdout"]))
    run["error_count"] = 0 if run["exit_code"] == 0 and run.get("synced") else 1
    return run


def inventory_probe() -> None:
    """In its own process: start the node inventory as the webhook does, wait for its list."""
    from webhook.kube.node_inventory import node_inventory_source

    started = time.monotonic()
    source = node_inventory_source("auto")
    synced = source.wait_synced(WAIT_SECONDS) if hasattr(source, "wait_synced") else False
    seconds = time.monotonic() - started
    snapshot = source.mig_inventory()
    print(
        json.dumps(
            {
                "synced": synced,
                "list_seconds": round(seconds, 2),
                "products": len(snapshot.memory_by_product),
            }
        )
    )
    if hasattr(source, "stop"):
        source.stop()


# --- the section -----------------------------------------------------------------------------


def measure(
    sizes: Sequence[int], workdir: Path, report: Callable[[str], object] = print
) -> dict[str, Any]:
    figures: dict[str, Any] = {"sizes": {}}
    middle = sorted(sizes)[len(sizes) // 2]
    for count in sizes:
        cluster = FakeCluster(count, workdir)
        try:
            first = advertise(cluster.kubeconfig)
            second = advertise(cluster.kubeconfig)
            found = inventory(cluster.kubeconfig)
        finally:
            cluster.stop()
        figures["sizes"][str(count)] = {"first": first, "second": second, "inventory": found}
        report(_line(count, first, second, found))
    cluster = FakeCluster(middle, workdir)
    try:
        serial = advertise(cluster.kubeconfig, "--patch-concurrency", "1", "--patch-qps", "0")
    finally:
        cluster.stop()
    figures["serial"] = {"nodes": middle, "first": serial}
    parallel = figures["sizes"][str(middle)]["first"]
    if serial.get("patches_per_second") and parallel.get("patches_per_second"):
        figures["parallel_over_serial"] = round(
            parallel["patches_per_second"] / serial["patches_per_second"], 2
        )
    report(
        f"baseline, {middle:,} nodes one patch at a time: {serial['seconds']} s, "
        f"{serial.get('patches_per_second')} patches/s; in parallel ÷ one at a time: "
        f"{figures.get('parallel_over_serial')}x"
    )
    smallest, largest = min(sizes), max(sizes)
    if smallest != largest:
        low = figures["sizes"][str(smallest)]["first"]["peak_rss_mib"]
        high = figures["sizes"][str(largest)]["first"]["peak_rss_mib"]
        figures["bytes_per_node"] = round((high - low) * 1024 * 1024 / (largest - smallest))
        report(f"peak RSS per node, {smallest:,} → {largest:,}: {figures['bytes_per_node']} B")
    for run in _runs(figures):
        run.pop("stdout", None)
        if not run.get("error_count"):
            run.pop("stderr_tail", None)
    figures["largest"] = figures["sizes"][str(largest)]
    return figures


def _runs(figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    runs = [run for size in figures["sizes"].values() for run in size.values()]
    return [*runs, figures["serial"]["first"]]


def _line(
    count: int, first: Mapping[str, Any], second: Mapping[str, Any], found: Mapping[str, Any]
) -> str:
    return (
        f"{count:,} nodes: first pass {first['seconds']} s ({first.get('patched')} patched, "
        f"{first.get('patches_per_second')}/s), peak {first['peak_rss_mib']} MiB; second pass "
        f"{second['seconds']} s, peak {second['peak_rss_mib']} MiB; node inventory "
        f"{found.get('list_seconds')} s, peak {found['peak_rss_mib']} MiB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.node_scale", description=__doc__)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--serve", nargs=2, metavar=("NODES", "KUBECONFIG"), help=argparse.SUPPRESS)
    parser.add_argument("--inventory", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(int(args.serve[0]), Path(args.serve[1]))
        return 0
    if args.inventory:
        inventory_probe()
        return 0
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as workdir:
        figures = measure(sizes, Path(workdir))
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
