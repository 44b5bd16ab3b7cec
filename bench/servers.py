"""The servers measured, each started in its own process group and stopped with the whole group:
the webhook exactly as `make run` serves it, the floor, and the per-connection-TLS baseline."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.memory import children, command_line
from bench.probe import HOST, ProbeError, healthy

REPO_ROOT = Path(__file__).resolve().parents[1]
GUNICORN = ".venv/bin/gunicorn"
# Above the 8443 of `make run` and the test suite's servers.
FIRST_PORT = 9443
START_SECONDS = 120.0
STOP_SECONDS = 30.0


class ServerError(Exception):
    pass


@dataclass
class Server:
    name: str
    command: Sequence[str]
    port: int
    log_file: Path
    env: dict[str, str]
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def start(self) -> None:
        with self.log_file.open("wb") as log:
            self._process = subprocess.Popen(
                list(self.command),
                cwd=REPO_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise ServerError(f"{self.name} exited with {code}:\n{self.log_tail()}")
            try:
                if healthy(self.port):
                    return
            except ProbeError as error:
                raise ServerError(f"{self.name}: {error}") from None
            time.sleep(0.2)
        raise ServerError(
            f"{self.name} did not answer /healthz in {START_SECONDS:.0f} s (log {self.log_file}):"
            f"\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGTERM to the whole group (make, the gunicorn master and its workers), then wait
        for all of it; SIGKILL what is left after STOP_SECONDS."""
        process, self._process = self._process, None
        if process is None:
            return
        _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            process.poll()  # reap our own child, or the group never looks empty
            if not _group_alive(process.pid):
                break
            time.sleep(0.1)
        else:
            _signal_group(process.pid, signal.SIGKILL)
        process.wait()

    def master(self) -> int:
        """The gunicorn master: the process started, or its child when it is make."""
        if self._process is None:
            raise ServerError(f"{self.name} is not running")
        for pid in (self._process.pid, *children(self._process.pid)):
            if "gunicorn" in command_line(pid):
                return pid
        raise ServerError(f"no gunicorn master found for {self.name}")

    def workers(self) -> list[int]:
        return children(self.master())

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def free_ports(count: int, first: int = FIRST_PORT) -> list[int]:
    """`count` loopback ports from `first` up that nothing listens on now."""
    ports: list[int] = []
    port = first
    while len(ports) < count:
        with socket.socket() as probe:
            try:
                probe.bind((HOST, port))
            except OSError:
                pass
            else:
                ports.append(port)
        port += 1
    return ports


# What `make run` gives gunicorn besides the address, for every server measured.
_SERVED = {"POLICY_DIR": "policies", "LOG_FORMAT": "text"}
_MAKE_SETTINGS = [f"{name}={value}" for name, value in _SERVED.items()]


def _gunicorn_env(port: int) -> dict[str, str]:
    return os.environ | {"BIND": f"{HOST}:{port}", **_SERVED}


def webhook_server(
    port: int, log_dir: Path, switches: dict[str, str] | None = None, name: str = "webhook"
) -> Server:
    """The webhook as `make run` serves it; `switches` turn pieces of the serving edge off."""
    # Variables on make's command line win over the caller's environment: every server here
    # serves the same policies with the same log layout.
    command = ["make", "-s", "run", f"BIND={HOST}:{port}", *_MAKE_SETTINGS]
    log_file = log_dir / f"{name.replace(' ', '-')}.log"
    return Server(name, command, port, log_file, os.environ | (switches or {}))


def floor_server(port: int, log_dir: Path) -> Server:
    command = [GUNICORN, "-c", "python:webhook.server.gunicorn_conf", "bench.floor_app:app"]
    return Server("floor", command, port, log_dir / "floor.log", _gunicorn_env(port))


def per_connection_tls_server(port: int, log_dir: Path) -> Server:
    command = [GUNICORN, "-c", "python:bench.per_connection_tls_conf"]
    log_file = log_dir / "per-connection-tls.log"
    return Server("per-connection-TLS baseline", command, port, log_file, _gunicorn_env(port))
