"""The real webhook server for tests: gunicorn started the way `make run` starts it, with TLS
on a loopback port, and a small HTTPS client that keeps its connection alive."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.certs import CertificatePaths, ensure_dev_certificates

REPO_ROOT = Path(__file__).resolve().parents[2]
GUNICORN_COMMAND = [sys.executable, "-m", "gunicorn", "-c", "python:webhook.server.gunicorn_conf"]


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookClient:
    def __init__(self, port: int, ca_file: Path) -> None:
        self.port = port
        self.context = ssl.create_default_context(cafile=str(ca_file))
        self._connection: http.client.HTTPSConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        for attempt in range(2):
            connection = self._connect()
            try:
                connection.request(method, path, body=body, headers=headers or {})
                response = connection.getresponse()
                data = response.read()
            except (ConnectionError, http.client.HTTPException):
                self.close()
                if attempt:
                    raise
                continue
            if response.will_close:
                self.close()
            return Reply(response.status, dict(response.getheaders()), data)
        raise AssertionError("unreachable")

    def post_json(self, path: str, document: Any) -> Reply:
        body = json.dumps(document).encode()
        return self.request("POST", path, body, {"Content-Type": "application/json"})

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self) -> http.client.HTTPSConnection:
        if self._connection is None:
            self._connection = http.client.HTTPSConnection(
                "localhost", self.port, context=self.context, timeout=10
            )
        return self._connection


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class WebhookServer:
    """One gunicorn master with its workers, serving `policy_dir`."""

    def __init__(self, policy_dir: Path, cert_dir: Path, log_file: Path) -> None:
        self.policy_dir = policy_dir
        self.certificates: CertificatePaths = ensure_dev_certificates(cert_dir)[0]
        self.port = free_port()
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "BIND": f"127.0.0.1:{self.port}",
            "POLICY_DIR": str(self.policy_dir),
            "TLS_CERT_FILE": str(self.certificates.cert),
            "TLS_KEY_FILE": str(self.certificates.key),
            "WORKERS": "2",
        }

    def start(self, timeout: float = 20) -> None:
        with self.log_file.open("wb") as log:
            self.process = subprocess.Popen(
                GUNICORN_COMMAND,
                cwd=REPO_ROOT,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        client = self.client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the webhook server exited:\n{self.log()}")
            try:
                if client.request("GET", "/readyz").status == 200:
                    client.close()
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the webhook server did not become ready:\n{self.log()}")

    def client(self) -> WebhookClient:
        return WebhookClient(self.port, self.certificates.ca_cert)

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
