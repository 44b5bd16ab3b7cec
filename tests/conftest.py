"""Shared fixtures: real webhook servers, started once per test session and policy set."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.server import WebhookServer

StartServer = Callable[[Path], WebhookServer]


@pytest.fixture(scope="session")
def webhook_server_for(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """A function that returns the running server for a policy directory, starting it once."""
    servers: dict[Path, WebhookServer] = {}
    cert_dir = tmp_path_factory.mktemp("certs")

    def start(policy_dir: Path) -> WebhookServer:
        key = policy_dir.resolve()
        if key not in servers:
            log_file = tmp_path_factory.mktemp("server") / "gunicorn.log"
            server = WebhookServer(key, cert_dir, log_file)
            server.start()
            servers[key] = server
        return servers[key]

    yield start
    for server in servers.values():
        server.stop()


@pytest.fixture(scope="session")
def shipped_server(webhook_server_for: StartServer) -> WebhookServer:
    from tests.support.server import REPO_ROOT

    return webhook_server_for(REPO_ROOT / "policies")
