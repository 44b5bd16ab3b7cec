"""The metrics on a plain-HTTP port of their own (METRICS_BIND), served by the gunicorn master
with every worker's values merged: what a stock Prometheus scrape config reaches."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.server import FRACTIONAL_POD_REVIEW, REPO_ROOT, WebhookServer, free_port
from webhook import __version__

DEADLINE_SECONDS = 10


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
        return answer.status, answer.read().decode()


def admissions(text: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "gpu_webhook_admissions"
        for sample in family.samples
        if sample.name == "gpu_webhook_admissions_total"
    )


def test_the_metrics_port_serves_every_workers_counts_without_tls(tmp_path: Path) -> None:
    port = free_port()
    environment = {"METRICS_BIND": f"127.0.0.1:{port}", "http_proxy": "", "HTTP_PROXY": ""}
    server = WebhookServer(
        REPO_ROOT / "policies", tmp_path / "certs", tmp_path / "gunicorn.log", environment
    )
    server.start()
    try:
        review = json.loads(FRACTIONAL_POD_REVIEW.read_text())
        for _ in range(6):  # a fresh connection each, so both workers answer some
            client = server.client()
            try:
                assert client.post_json("/mutate", review).status == 200
            finally:
                client.close()
        deadline = time.monotonic() + DEADLINE_SECONDS
        text = ""
        while time.monotonic() < deadline:
            status, text = scrape(port)
            assert status == 200
            if admissions(text) >= 6:
                break
            time.sleep(0.2)  # each worker publishes its counts once a second
        assert admissions(text) == 6, text[-2000:]
        assert f'gpu_webhook_build_info{{version="{__version__}"}} 1.0' in text
        assert "gpu_webhook_serving_certificate_expiry_timestamp_seconds " in text
        assert scrape(port, "/healthz") == (200, "ok\n")
        assert f"metrics on http://127.0.0.1:{port}/metrics" in server.log()
    finally:
        server.stop()
