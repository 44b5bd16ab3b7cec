"""Shared fixtures: real webhook servers, started once per test session and policy set."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.fake_apiserver import FakeApiServer
from tests.support.server import WebhookServer

StartServer = Callable[[Path], WebhookServer]


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kubernetes client honours proxy variables: keep every request on loopback."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def cluster_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_proxy: None
) -> Iterator[FakeApiServer]:
    """A fake Kubernetes API of this test's own, which the kubeconfig in KUBECONFIG names."""
    with FakeApiServer(token="test-token") as api:
        monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(tmp_path / "kube" / "config")))
        yield api


@pytest.fixture(scope="session")
def kube_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeApiServer]:
    """The Kubernetes API the shared servers read namespace labels from. Tests add the
    namespaces they need; a namespace added after a server listed them is still found, by
    the GET the server makes on a miss."""
    with FakeApiServer(token="scenario-token") as api:
        yield api


@pytest.fixture(scope="session")
def webhook_server_for(
    tmp_path_factory: pytest.TempPathFactory, kube_api: FakeApiServer
) -> Iterator[StartServer]:
    """A function that returns the running server for a policy directory, starting it once."""
    servers: dict[Path, WebhookServer] = {}
    cert_dir = tmp_path_factory.mktemp("certs")
    kubeconfig = kube_api.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    cluster = {"NAMESPACE_LABELS": "kubeconfig", "KUBECONFIG": str(kubeconfig)}
    # The Kubernetes client honours proxy variables; the fake API is on loopback.
    cluster |= {name: "" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}

    def start(policy_dir: Path) -> WebhookServer:
        key = policy_dir.resolve()
        if key not in servers:
            log_file = tmp_path_factory.mktemp("server") / "gunicorn.log"
            server = WebhookServer(key, cert_dir, log_file, cluster)
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
