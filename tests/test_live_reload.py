"""Live reload on the real server: gunicorn with two workers over TLS, serving a policy
directory laid out like a mounted ConfigMap and watched every 0.2 s. Edits are published the
way kubelet publishes them, by swapping the `..data` link. And a plain directory whose file is
rewritten in place by a writer that pauses mid-file."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.support.server import (
    FRACTIONAL_POD_REVIEW,
    REPO_ROOT,
    MountedConfigMap,
    WebhookServer,
)
from webhook.policy.snapshot import PolicyFiles

SHIPPED = {path.name: path.read_text() for path in (REPO_ROOT / "policies").glob("*.yaml")}
GOOD = SHIPPED["default.yaml"]
A100 = GOOD.replace("defaultModel: Tesla-T4", "defaultModel: NVIDIA-A100-SXM4-40GB")
BROKEN = GOOD.replace("unit: MiB", "unit: KiB")
BROKEN_LINE = BROKEN.splitlines().index("    unit: KiB") + 1
# The example asks for 250m of a GPU: a quarter of the default model's memory.
QUARTER_OF = {GOOD: 15360 // 4, A100: 40960 // 4}
REVIEW = json.loads(FRACTIONAL_POD_REVIEW.read_text())
DEADLINE_SECONDS = 10
MAX_REQUESTS_PER_CLIENT = 2000

Readiness = dict[str, Any]


@dataclass
class Served:
    server: WebhookServer

    def get(self, path: str) -> tuple[int, bytes]:
        client = self.server.client()  # a fresh connection, so any worker may answer
        try:
            reply = client.request("GET", path)
        finally:
            client.close()
        return reply.status, reply.body

    def readiness(self) -> Readiness:
        status, body = self.get("/readyz")
        assert status == 200, body
        return json.loads(body)

    def converge(
        self,
        until: Callable[[Readiness], bool],
        workers_are: Callable[[set[int]], bool] = lambda pids: len(pids) == 2,
    ) -> dict[int, Readiness]:
        """Poll /readyz until every worker's latest answer meets `until`; those answers."""
        latest: dict[int, Readiness] = {}
        pids: set[int] = set()
        end = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < end:
            answer = self.readiness()
            latest[answer["worker"]] = answer
            pids = self.server.worker_pids()
            if workers_are(pids) and all(p in latest and until(latest[p]) for p in pids):
                return {pid: latest[pid] for pid in pids}
            time.sleep(0.02)
        raise AssertionError(
            f"the workers {sorted(pids)} did not converge; last answers: {latest}\n"
            + self.server.log()[-3000:]
        )


@dataclass
class Live(Served):
    mount: MountedConfigMap

    def publish(self, default_yaml: str) -> str:
        """Publish the shipped policies with `default_yaml`; the digest of what was published."""
        self.mount.publish({**SHIPPED, "default.yaml": default_yaml})
        return PolicyFiles.read(self.mount.directory).digest

    def serve(self, default_yaml: str) -> str:
        """Publish a set that loads and wait until every worker serves it."""
        digest = self.publish(default_yaml)
        self.converge(lambda a: a["policySet"]["digest"] == digest and not a["reload"]["failing"])
        return digest

    def quarter_vram(self) -> int:
        client = self.server.client()
        try:
            reply = client.post_json("/mutate", REVIEW)
        finally:
            client.close()
        return vram_of(reply.status, reply.json())


def vram_of(status: int, answer: Any) -> int:
    """The VRAM the answer gives the example pod's container, checking the review's shape."""
    assert status == 200, answer
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["uid"] == REVIEW["request"]["uid"]
    assert response["allowed"] is True, response
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    pod = jsonpatch.apply_patch(copy.deepcopy(REVIEW["request"]["object"]), patch)
    return int(pod["spec"]["containers"][0]["resources"]["limits"]["example.com/vram"])


def metric(text: str, sample: str) -> float:
    found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    assert found, f"{sample} is not in:\n{text}"
    return float(found.group(1))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("live-reload")
    mount = MountedConfigMap(root / "policies")
    mount.publish(SHIPPED)
    server = WebhookServer(
        mount.directory, root / "certs", root / "gunicorn.log", {"POLICY_RELOAD_SECONDS": "0.2"}
    )
    server.start()
    try:
        yield Live(server, mount)
    finally:
        server.stop()


def test_an_edit_reaches_every_worker(live: Live) -> None:
    live.serve(GOOD)
    assert live.quarter_vram() == QUARTER_OF[GOOD]

    digest = live.publish(A100)
    answers = live.converge(lambda a: a["policySet"]["digest"] == digest)

    for answer in answers.values():
        assert answer["status"] == "ready" and answer["policies"] == ["default"]
        assert answer["policySet"]["source"] == "directory"
        assert re.fullmatch(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", answer["policySet"]["loadedAt"]
        )
        assert answer["reload"]["intervalSeconds"] == 0.2
        assert answer["reload"]["reloads"] >= 1 and answer["reload"]["failing"] is False
    for _ in range(4):
        assert live.quarter_vram() == QUARTER_OF[A100]


def test_a_broken_edit_leaves_the_last_good_set_serving(live: Live) -> None:
    good = live.serve(A100)
    status, text = live.get("/metrics")
    failures_before = metric(text.decode(), 'gpu_webhook_policy_reloads_total{result="failure"}')

    live.publish(BROKEN)
    answers = live.converge(lambda a: a["reload"]["failing"])

    problem = (
        f"{live.mount.directory / 'default.yaml'}:{BROKEN_LINE}: spec.sharing.unit: "
        "'KiB' is not one of 'MiB', 'GiB'"
    )
    for answer in answers.values():
        assert answer["status"] == "ready"
        assert answer["policySet"]["digest"] == good
        assert answer["reload"]["lastFailure"]["problems"] == [problem]
    status, text = live.get("/metrics")
    assert status == 200
    metrics = text.decode()
    failures = metric(metrics, 'gpu_webhook_policy_reloads_total{result="failure"}')
    assert failures >= failures_before + 2  # each worker tried once
    assert metric(metrics, "gpu_webhook_policy_reload_failing") == 1
    assert metric(metrics, "gpu_webhook_policies_loaded") == 1
    assert metric(metrics, "gpu_webhook_policy_last_success_timestamp_seconds") > 0
    for _ in range(4):
        assert live.quarter_vram() == QUARTER_OF[A100]
    assert problem in live.server.log()

    live.serve(GOOD)
    status, text = live.get("/metrics")
    assert metric(text.decode(), "gpu_webhook_policy_reload_failing") == 0


def test_admissions_never_fail_while_the_policies_reload(live: Live) -> None:
    live.serve(GOOD)
    before = live.converge(lambda a: True)
    results: list[tuple[int, Any] | BaseException] = []
    stop = threading.Event()
    end = time.monotonic() + 15

    def hammer() -> None:
        client = live.server.client()
        try:
            for number in range(MAX_REQUESTS_PER_CLIENT):
                if stop.is_set() or time.monotonic() > end:
                    break
                if number % 5 == 0:
                    client.close()  # a new connection now and then, to reach both workers
                try:
                    reply = client.post_json("/mutate", REVIEW)
                    results.append((reply.status, reply.json()))
                except Exception as error:
                    results.append(error)
        finally:
            client.close()

    hammers = [threading.Thread(target=hammer) for _ in range(2)]
    for thread in hammers:
        thread.start()
    try:
        # Each version stays a little longer than a poll, so every worker loads most of them.
        for version in [A100, BROKEN, GOOD] * 4:
            live.publish(version)
            time.sleep(0.25)
    finally:
        stop.set()
        for thread in hammers:
            thread.join(max(0.0, end - time.monotonic()) + 5)

    assert len(results) >= 100
    amounts = [vram_of(*result) if isinstance(result, tuple) else result for result in results]
    assert set(amounts) == set(QUARTER_OF.values()), set(amounts)
    after = live.serve(A100)
    answers = live.converge(lambda a: a["policySet"]["digest"] == after)
    for pid, answer in answers.items():
        if pid in before:
            assert answer["reload"]["reloads"] > before[pid]["reload"]["reloads"]
            assert answer["reload"]["failures"] > before[pid]["reload"]["failures"]


def test_a_worker_that_boots_while_the_directory_is_bad_serves_the_last_good_set(
    live: Live,
) -> None:
    live.serve(GOOD)
    good = live.serve(A100)  # newer than the set the master checked at startup
    live.publish(BROKEN)
    workers = live.converge(lambda a: a["reload"]["failing"])

    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    answers = live.converge(
        lambda a: a["policySet"]["digest"] == good,
        workers_are=lambda pids: len(pids) == 2 and victim not in pids,
    )

    (newcomer,) = set(answers) - set(workers)
    booted = answers[newcomer]
    assert booted["policySet"]["source"] == "last-good snapshot"
    assert booted["reload"]["failing"] is True and booted["reload"]["failures"] == 1
    (problem,) = booted["reload"]["lastFailure"]["problems"]
    assert f"default.yaml:{BROKEN_LINE}: spec.sharing.unit:" in problem
    assert live.quarter_vram() == QUARTER_OF[A100]

    live.serve(GOOD)
    for answer in live.converge(lambda a: True).values():
        assert answer["policySet"]["source"] == "directory"


def test_the_master_removes_the_state_directory_it_created(tmp_path: Path) -> None:
    server = WebhookServer(REPO_ROOT / "policies", tmp_path / "certs", tmp_path / "log")
    server.start()
    found = re.search(r"state directory: (\S+)", server.log())
    assert found, server.log()
    state_dir = Path(found.group(1))
    assert (state_dir / "last-good").is_dir()
    server.stop()
    assert not state_dir.exists()


def first_half(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[: len(lines) // 2])


def test_a_file_rewritten_in_place_is_never_served_half_written(tmp_path: Path) -> None:
    """The reported race: a writer truncates default.yaml, writes its first half (which loads:
    tests/unit/test_policy_store.py), pauses 0.2 s and writes the rest, while both workers
    poll every 50 ms. Neither may serve the half; each holds it back and says so."""
    policies, scratch = tmp_path / "policies", tmp_path / "scratch"
    for directory in (policies, scratch):
        directory.mkdir()
    (policies / "default.yaml").write_text(GOOD)
    server = WebhookServer(
        policies, tmp_path / "certs", tmp_path / "gunicorn.log", {"POLICY_RELOAD_SECONDS": "0.05"}
    )
    server.start()
    served = Served(server)
    texts = [A100, GOOD, A100]
    try:
        workers = set(served.converge(lambda a: True))  # both booted: this is about reloads
        for text in texts:
            half = first_half(text)
            with (policies / "default.yaml").open("w") as file:
                file.write(half)
                file.flush()
                time.sleep(0.2)
                file.write(text[len(half) :])
            digest = PolicyFiles.read(policies).digest
            served.converge(lambda a, digest=digest: a["policySet"]["digest"] == digest)
    finally:
        server.stop()

    halves = []
    for text in texts:
        (scratch / "default.yaml").write_text(first_half(text))
        halves.append(PolicyFiles.read(scratch).digest)
    log = server.log()
    assert [digest for digest in halves if digest in log] == []
    assert "policies reloaded from" in log
    held_back = f"policies in {policies}: default.yaml is still being written; keeping the last"
    assert {r["pid"] for r in server.log_records() if r["message"].startswith(held_back)} == workers
