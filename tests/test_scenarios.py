"""Scenarios as files, posted to the real server over TLS.

Each folder under tests/scenarios/<group>/ is one case (tests/scenarios/README.md): it is
loaded and checked by the same code as `python -m webhook test`, but answered by gunicorn over
HTTPS instead of in this process. A group uses its own `policies/` folder when it has one, else
the shipped `policies/`. The folder name is the test id.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StartServer
from tests.support.fake_apiserver import FakeApiServer
from tests.support.server import REPO_ROOT, WebhookClient
from webhook.cli.cases import PolicyCase
from webhook.cli.checks import check_case
from webhook.cli.scenario_folders import is_scenario_folder, load_scenario
from webhook.engine.evaluate import Mode
from webhook.policy.namespace_labels import StaticNamespaceLabels

SCENARIO_ROOT = Path(__file__).parent / "scenarios"
SCENARIO_FOLDERS = sorted(
    folder for folder in SCENARIO_ROOT.glob("*/*") if is_scenario_folder(folder)
)


def scenario_id(folder: Path) -> str:
    return f"{folder.parent.name}/{folder.name}"


def load(folder: Path) -> PolicyCase:
    return load_scenario(folder, SCENARIO_ROOT, REPO_ROOT / "policies")


@pytest.fixture(scope="module", autouse=True)
def scenario_namespaces(kube_api: FakeApiServer) -> None:
    """The namespace labels scenarios give, served by the Kubernetes API the servers ask.
    The API is shared, so a namespace must have the same labels in every scenario."""
    given: dict[str, tuple[Path, Mapping[str, str]]] = {}
    for folder in SCENARIO_FOLDERS:
        labels = load(folder).namespace_labels
        assert isinstance(labels, StaticNamespaceLabels)
        for namespace, values in labels.labels.items():
            if namespace in given:
                first, earlier = given[namespace]
                assert earlier == values, f"{folder} and {first} label {namespace} differently"
                continue
            given[namespace] = (folder, values)
            kube_api.add_namespace(namespace, values)


@pytest.fixture(scope="module")
def clients() -> dict[Path, WebhookClient]:
    """One kept-alive client per policy set, as the apiserver keeps its connections."""
    return {}


def test_scenarios_were_found() -> None:
    assert len(SCENARIO_FOLDERS) >= 28


@pytest.mark.parametrize("folder", SCENARIO_FOLDERS, ids=map(scenario_id, SCENARIO_FOLDERS))
def test_scenario(
    folder: Path, webhook_server_for: StartServer, clients: dict[Path, WebhookClient]
) -> None:
    case = load(folder)
    policy_dir = (REPO_ROOT / case.policies).resolve()
    if policy_dir not in clients:
        clients[policy_dir] = webhook_server_for(policy_dir).client()
    client = clients[policy_dir]

    def post(endpoint: Mode, review: Mapping[str, Any]) -> Mapping[str, Any]:
        reply = client.post_json(f"/{endpoint}", review)
        assert reply.status == 200, reply.body
        return reply.json()

    failures = check_case(case.review, case.endpoint, case.expect, post)
    assert not failures, "\n".join(
        "\n".join((failure.reason, *failure.details)) for failure in failures
    )
