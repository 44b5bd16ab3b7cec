"""The real webhook server for tests: gunicorn started the way `make run` starts it, with TLS
on a loopback port, and a small HTTPS client that keeps its connection alive."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.memory import children
from webhook.certs import CertificatePaths, ensure_dev_certificates

REPO_ROOT = Path(__file__).resolve().parents[2]
# A review of a pod asking nvidia.com/gpu 0.25, which the shipped policies rewrite.
FRACTIONAL_POD_REVIEW = REPO_ROOT / "examples" / "review-fractional-pod.json"
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


def run_until_exit(environment: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """gunicorn started as `make run` starts it, for a start that is expected to fail: what it
    printed, and how it exited."""
    return subprocess.run(
        GUNICORN_COMMAND,
        cwd=REPO_ROOT,
        env=dict(environment),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


class MountedConfigMap:
    """A directory laid out as kubelet mounts a ConfigMap: the files live in a timestamped
    hidden folder, `..data` links to it, and each visible name links to `..data/<name>`. An
    update writes a new folder and swaps `..data` with a rename, as kubelet does."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self._published = 0

    def publish(self, files: Mapping[str, str]) -> None:
        self._published += 1
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
        folder = self.directory / f"..{stamp}.{os.getpid()}{self._published:06d}"
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        data = self.directory / "..data"
        previous = data.resolve() if data.is_symlink() else None
        staged = self.directory / "..data_tmp"
        staged.symlink_to(folder.name)
        os.replace(staged, data)
        for name in files:
            visible = self.directory / name
            if not visible.is_symlink():
                visible.symlink_to(Path("..data") / name)
        for visible in self.directory.iterdir():
            if visible.is_symlink() and visible.name not in files and visible != data:
                visible.unlink()
        if previous is not None:
            shutil.rmtree(previous)


class WebhookServer:
    """One gunicorn master with its workers, serving `policy_dir`."""

    def __init__(
        self,
        policy_dir: Path,
        cert_dir: Path,
        log_file: Path,
        extra_environment: Mapping[str, str] | None = None,
    ) -> None:
        self.policy_dir = policy_dir
        self.certificates: CertificatePaths = ensure_dev_certificates(cert_dir)[0]
        self.port = free_port()
        self.log_file = log_file
        self.extra_environment = dict(extra_environment or {})
        self.process: subprocess.Popen[bytes] | None = None

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "BIND": f"127.0.0.1:{self.port}",
            "POLICY_DIR": str(self.policy_dir),
            "TLS_CERT_FILE": str(self.certificates.cert),
            "TLS_KEY_FILE": str(self.certificates.key),
            "WORKERS": "2",
            # Never the kubeconfig of whoever runs the tests: servers that need namespace
            # labels are pointed at a fake Kubernetes API explicitly.
            "NAMESPACE_LABELS": "off",
            # The tests tell workers apart by /readyz's details (off by default: any client
            # of the admission port could read them).
            "READYZ_DETAILS": "on",
            **self.extra_environment,
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

    def worker_pids(self) -> set[int]:
        """The pids of the master's worker processes, from /proc."""
        assert self.process is not None
        return set(children(self.process.pid))

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The log, a JSON object per line (LOG_FORMAT's default)."""
        return [json.loads(line) for line in self.log().splitlines() if line]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                # Longer than gunicorn_conf's graceful_timeout (20 s), so that a slow stop still
                # ends in the workers' own exit, which publishes the metrics they counted.
                self.process.wait(timeout=25)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
