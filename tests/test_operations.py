"""Operating the real server: admissions counted and timed in /metrics, summed over both
workers; the served certificate's expiry; and one JSON log line per admission that names the
request and its verdict, never the object or who sent it."""

from __future__ import annotations

import json
import os
import signal
import ssl
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from tests.support.server import REPO_ROOT, WebhookClient, WebhookServer
from tests.support.waiting import eventually

SHIPPED = REPO_ROOT / "tests" / "scenarios" / "shipped"


def scenario(name: str) -> dict[str, Any]:
    return json.loads((SHIPPED / name / "review.json").read_text())


QUARTER = scenario("01-create-pod-frac-quarter")
REQUESTS_DIFFER = scenario("10-create-pod-bad-req-ne-lim")
PLAIN = scenario("11-create-pod-plain-web")
CREDENTIAL_ID = QUARTER["request"]["userInfo"]["extra"][
    "authentication.kubernetes.io/credential-id"
]

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Post:
    endpoint: str
    body: bytes
    # What gpu_webhook_admissions_total counts it under, besides the endpoint.
    kind: str
    verdict: str
    policy: str

    @property
    def is_admission(self) -> bool:
        return self.verdict != "bad_request"

    def labels(self) -> Labels:
        labels = {"endpoint": self.endpoint, "kind": self.kind}
        return tuple(sorted({**labels, "verdict": self.verdict, "policy": self.policy}.items()))


POSTS = [
    Post("mutate", json.dumps(QUARTER).encode(), "Pod", "patched", "default"),
    Post("mutate", json.dumps(REQUESTS_DIFFER).encode(), "Pod", "denied", "default"),
    Post("mutate", json.dumps(PLAIN).encode(), "Pod", "allowed", ""),
    Post("validate", json.dumps(QUARTER).encode(), "Pod", "denied", "default"),
    Post("mutate", b"this is not JSON", "", "bad_request", ""),
]
ADMISSIONS_PER_ROUND = sum(post.is_admission for post in POSTS)
MIN_ROUNDS, MAX_ROUNDS = 4, 60
# Admissions are counted in their request; a scrape after the answer sees them, but allow for
# a slow machine.
PUBLISH_WAIT_SECONDS = 5
EXITING_WORKER_ADMISSIONS = 20
ANSWERED_LINES = 10


@dataclass
class Traffic:
    server: WebhookServer
    rounds: int

    def log_lines(self) -> list[dict[str, Any]]:
        return self.server.log_records()

    def admission_lines(self) -> list[dict[str, Any]]:
        return [
            line
            for line in self.log_lines()
            if line["logger"] == "webhook.admission" and line.get("verdict") != "bad_request"
        ]

    def metrics(self) -> dict[str, dict[Labels, float]]:
        """Every sample of /metrics, by name and then by its sorted labels."""
        client = self.server.client()
        try:
            reply = client.request("GET", "/metrics")
        finally:
            client.close()
        assert reply.status == 200
        samples: dict[str, dict[Labels, float]] = {}
        for family in text_string_to_metric_families(reply.body.decode()):
            for sample in family.samples:
                labels = tuple(sorted(sample.labels.items()))
                samples.setdefault(sample.name, {})[labels] = sample.value
        return samples

    def request_lines(self) -> list[dict[str, Any]]:
        """The line of every post: admissions, and bodies that were no review."""
        return [line for line in self.log_lines() if line["logger"] == "webhook.admission"]

    def check_request_lines(self) -> None:
        """A line is written before its answer is sent: every post so far has its line, the
        rejected body's too."""
        assert len(self.request_lines()) == len(POSTS) * self.rounds

    def wait_until_published(self) -> None:
        """Each worker adds what it counted to the shared metrics within a second; a scrape
        answered by one worker may miss the last second of the other's."""
        posted = len(POSTS) * self.rounds
        eventually(lambda: self.admissions_counted() >= posted, PUBLISH_WAIT_SECONDS, 0.1)

    def admissions_counted(self) -> float:
        return sum(self.metrics()["gpu_webhook_admissions_total"].values())


def shipped_policies_server(root: Path, environment: dict[str, str] | None = None) -> WebhookServer:
    """A server of the shipped policies, without live reload, its files under `root`."""
    return WebhookServer(
        REPO_ROOT / "policies",
        root / "certs",
        root / "gunicorn.log",
        {"POLICY_RELOAD_SECONDS": "0", **(environment or {})},
    )


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traffic]:
    """The posts above, a round at a time, each round on a fresh connection so that either
    worker may take it, until both workers have answered some."""
    server = shipped_policies_server(
        tmp_path_factory.mktemp("operations"),
        {"LOG_FORMAT": "json"},
    )
    server.start()
    try:
        traffic = Traffic(server, 0)
        while traffic.rounds < MIN_ROUNDS or (
            traffic.rounds < MAX_ROUNDS
            and len({line["pid"] for line in traffic.admission_lines()}) < 2
        ):
            client = server.client()
            try:
                for post in POSTS:
                    headers = {"Content-Type": "application/json"}
                    reply = client.request("POST", f"/{post.endpoint}", post.body, headers)
                    assert reply.status == (200 if post.is_admission else 400)
            finally:
                client.close()
            traffic.rounds += 1
            traffic.check_request_lines()
        traffic.wait_until_published()
        yield traffic
    finally:
        server.stop()


def test_admissions_are_counted_by_endpoint_kind_verdict_and_policy_over_both_workers(
    traffic: Traffic,
) -> None:
    answered_by = {line["pid"] for line in traffic.admission_lines()}
    assert answered_by == traffic.server.worker_pids(), "one worker answered every round"

    counted = traffic.metrics()["gpu_webhook_admissions_total"]
    expected = Counter(post.labels() for post in POSTS)
    for labels, times in expected.items():
        assert counted[labels] == times * traffic.rounds, labels
    assert sum(counted.values()) == len(POSTS) * traffic.rounds


def test_the_duration_histogram_counts_each_admission_once(traffic: Traffic) -> None:
    samples = traffic.metrics()
    counts = samples["gpu_webhook_admission_duration_seconds_count"]
    buckets = samples["gpu_webhook_admission_duration_seconds_bucket"]
    sums = samples["gpu_webhook_admission_duration_seconds_sum"]
    for endpoint in ("mutate", "validate"):
        admissions = sum(post.endpoint == endpoint and post.is_admission for post in POSTS)
        count = counts[(("endpoint", endpoint),)]
        assert count == admissions * traffic.rounds
        assert buckets[(("endpoint", endpoint), ("le", "+Inf"))] == count
        assert 0 < sums[(("endpoint", endpoint),)] < count  # each well under a second
    assert (
        buckets[(("endpoint", "mutate"), ("le", "0.0005"))]
        <= buckets[(("endpoint", "mutate"), ("le", "1.0"))]
    )


def test_the_certificate_expiry_is_the_served_certificates_not_after(traffic: Traffic) -> None:
    served = ssl.get_server_certificate(
        ("127.0.0.1", traffic.server.port), ca_certs=str(traffic.server.certificates.ca_cert)
    )
    not_after = x509.load_pem_x509_certificate(served.encode()).not_valid_after_utc.timestamp()
    (value,) = traffic.metrics()[
        "gpu_webhook_serving_certificate_expiry_timestamp_seconds"
    ].values()
    assert value == not_after


def test_every_log_line_is_json_and_there_is_no_access_log(traffic: Traffic) -> None:
    lines = traffic.log_lines()  # json.loads fails on any line that is not JSON
    assert {"time", "level", "logger", "pid", "message"} <= set(lines[0])
    assert any(line["logger"] == "gunicorn.error" for line in lines)
    assert not any(line["logger"] == "gunicorn.access" for line in lines)


def test_one_log_line_per_admission_names_the_request_and_its_verdict(traffic: Traffic) -> None:
    lines = traffic.admission_lines()
    assert len(lines) == ADMISSIONS_PER_ROUND * traffic.rounds
    by_answer = {(line["endpoint"], line["uid"]): line for line in lines}
    assert len(by_answer) == ADMISSIONS_PER_ROUND

    patched = by_answer[("mutate", QUARTER["request"]["uid"])]
    assert list(patched) == [
        *("time", "level", "logger", "pid", "message", "uid", "endpoint", "kind"),
        *("namespace", "name", "operation", "dryRun", "verdict", "policy"),
        *("patchOperations", "warnings", "durationMs"),
    ]
    assert patched["time"].endswith("Z") and patched["level"] == "info"
    assert (patched["kind"], patched["namespace"], patched["name"]) == ("Pod", "ml", "frac-quarter")
    assert (patched["operation"], patched["dryRun"]) == ("CREATE", False)
    assert (patched["verdict"], patched["policy"]) == ("patched", "default")
    # applied, rewritten, pinned, and not enforced on the shipped pool
    assert patched["patchOperations"] > 0 and patched["warnings"] == 4
    assert 0 < patched["durationMs"] < 1000

    denied = by_answer[("mutate", REQUESTS_DIFFER["request"]["uid"])]
    assert (denied["verdict"], denied["policy"], denied["code"]) == ("denied", "default", 403)
    assert 'requests "1" differ from limits "2"' in denied["denial"]
    assert denied["patchOperations"] == 0

    plain = by_answer[("mutate", PLAIN["request"]["uid"])]
    assert (plain["verdict"], plain["policy"]) == ("allowed", "")
    assert "code" not in plain and "denial" not in plain

    unrewritten = by_answer[("validate", QUARTER["request"]["uid"])]
    assert (unrewritten["verdict"], unrewritten["code"]) == ("denied", 403)

    rejected = [line for line in traffic.log_lines() if line.get("verdict") == "bad_request"]
    assert len(rejected) == traffic.rounds
    assert rejected[0]["httpStatus"] == 400 and "not JSON" in rejected[0]["error"]


def test_the_log_holds_neither_the_object_nor_who_sent_it(traffic: Traffic) -> None:
    text = traffic.server.log()
    for secret in (*CREDENTIAL_ID, "system:masters", '"admin"', "userInfo"):
        assert secret not in text
    for line in traffic.admission_lines():
        assert not {"object", "oldObject", "patch", "userInfo"} & set(line)
    image = QUARTER["request"]["object"]["spec"]["containers"][0]["image"]
    assert image not in text


def admitted_on_one_worker(server: WebhookServer) -> tuple[WebhookClient, int]:
    """EXITING_WORKER_ADMISSIONS reviews over one kept-alive connection, so one worker answers
    them all; the connection, still open, and that worker's pid."""
    client = server.client()
    for _ in range(EXITING_WORKER_ADMISSIONS):
        assert client.post_json("/mutate", QUARTER).status == 200
    return client, client.request("GET", "/readyz").json()["worker"]


def test_a_worker_that_exits_keeps_the_admissions_it_counted(tmp_path: Path) -> None:
    server = shipped_policies_server(tmp_path)
    server.start()
    try:
        client, worker = admitted_on_one_worker(server)
        client.close()
        # At once: what it counted is in the shared files already.
        os.kill(worker, signal.SIGTERM)
        eventually(lambda: worker not in server.worker_pids(), timeout=15)
        traffic = Traffic(server, 0)
        labels = Post("mutate", b"", "Pod", "patched", "default").labels()
        counted = traffic.metrics()["gpu_webhook_admissions_total"].get(labels)
        assert counted == EXITING_WORKER_ADMISSIONS
    finally:
        server.stop()


def test_another_workers_scrape_counts_every_admission_at_once(tmp_path: Path) -> None:
    server = shipped_policies_server(tmp_path)
    server.start()
    try:
        answering, worker = admitted_on_one_worker(server)
        for _ in range(100):
            scraping = server.client()
            if scraping.request("GET", "/readyz").json()["worker"] != worker:
                break
            scraping.close()
        else:
            raise AssertionError("no connection reached the other worker")
        reply = scraping.request("GET", "/metrics")  # the other worker, at once
        scraping.close()
        answering.close()
        labels = 'endpoint="mutate",kind="Pod",policy="default",verdict="patched"'
        assert f"gpu_webhook_admissions_total{{{labels}}} {EXITING_WORKER_ADMISSIONS}.0" in (
            reply.body.decode()
        )
    finally:
        server.stop()


def test_an_admissions_line_is_written_before_its_answer_is_sent(tmp_path: Path) -> None:
    server = shipped_policies_server(tmp_path)
    server.start()
    try:
        client = server.client()
        traffic = Traffic(server, 0)
        for answered in range(1, ANSWERED_LINES + 1):
            assert client.post_json("/mutate", QUARTER).status == 200
            assert len(traffic.admission_lines()) == answered
        client.close()
    finally:
        server.stop()
