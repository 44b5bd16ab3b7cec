"""The metrics on a plain-HTTP port of their own (METRICS_BIND), served by the gunicorn master
with every worker's values merged: what a stock Prometheus scrape config reaches."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.server import FRACTIONAL_POD_REVIEW, REPO_ROOT, WebhookServer, free_port
from tests.support.waiting import eventually
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


def test_the_metrics_port_shows_each_workers_details_and_the_admission_port_only_readiness(
    tmp_path: Path,
) -> None:
    port = free_port()
    environment = {
        "METRICS_BIND": f"127.0.0.1:{port}",
        "READYZ_DETAILS": "off",
        "http_proxy": "",
        "HTTP_PROXY": "",
    }
    server = WebhookServer(
        REPO_ROOT / "policies", tmp_path / "certs", tmp_path / "gunicorn.log", environment
    )
    server.start()
    try:
        client = server.client()
        assert client.request("GET", "/readyz").json() == {"status": "ready"}
        client.close()

        def workers_shown() -> list[dict[str, Any]]:
            status, text = scrape(port, "/status")
            assert status == 200
            return list(json.loads(text)["workers"])

        # Each worker writes its file when it has loaded the policies; one may still be booting.
        assert eventually(
            lambda: {worker["worker"] for worker in workers_shown()} == server.worker_pids()
        )
        workers = workers_shown()
        assert all(worker["policies"] == ["default"] for worker in workers)
        assert all(worker["reload"]["failing"] is False for worker in workers)
    finally:
        server.stop()


DRIPPING_CLIENTS = 100
# METRICS_REQUEST_SECONDS, shorter than its default (10 s) to keep the suite quick.
METRICS_REQUEST_SECONDS = 3
LET_GO_SECONDS = METRICS_REQUEST_SECONDS + 2


def test_the_metrics_port_lets_go_of_header_dripping_clients_and_keeps_answering(
    tmp_path: Path,
) -> None:
    port = free_port()
    environment = {
        "METRICS_BIND": f"127.0.0.1:{port}",
        "METRICS_REQUEST_SECONDS": str(METRICS_REQUEST_SECONDS),
        "http_proxy": "",
        "HTTP_PROXY": "",
    }
    server = WebhookServer(
        REPO_ROOT / "policies", tmp_path / "certs", tmp_path / "gunicorn.log", environment
    )
    server.start()
    drippers = [
        socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(DRIPPING_CLIENTS)
    ]
    stop = threading.Event()

    def drip() -> None:
        head = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Drip: " + b"y" * 100
        for byte in (head[i : i + 1] for i in range(len(head))):
            for client in drippers:
                with contextlib.suppress(OSError):
                    client.send(byte)
            if stop.wait(2):
                return

    dripping = threading.Thread(target=drip, daemon=True)
    dripping.start()
    started = time.monotonic()
    try:
        # A scrape is answered at once while they drip.
        for _ in range(3):
            assert scrape(port, "/healthz") == (200, "ok\n")
            time.sleep(0.5)
        for client in drippers:
            client.settimeout(max(LET_GO_SECONDS - (time.monotonic() - started), 0.1))
            with contextlib.suppress(ConnectionResetError):  # closed at once, without a word
                assert client.recv(1) == b"", "a dripping client was answered"

        let_go = time.monotonic() - started
        print(f"\n{DRIPPING_CLIENTS} header-dripping clients let go after {let_go:.1f} s")
        assert let_go < LET_GO_SECONDS
        assert "Traceback" not in server.log()
        assert all(line.get("level") != "error" for line in server.log_records())
    finally:
        stop.set()
        dripping.join()
        for client in drippers:
            client.close()
        server.stop()
