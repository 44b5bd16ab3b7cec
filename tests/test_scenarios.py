"""Scenarios as files, posted to the real server over TLS.

Each folder under tests/scenarios/<group>/ holds one AdmissionReview (`review.json`) and what
must come back (`expected.yaml`, plus `mutated.json` when a patch is expected). A group uses
its own `policies/` folder when it has one, else the shipped `policies/`. The folder name is
the test id. tests/scenarios/README.md describes the format.
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.conftest import StartServer
from tests.support.server import REPO_ROOT, WebhookClient

SCENARIO_ROOT = Path(__file__).parent / "scenarios"
MAX_WARNING_LENGTH = 120


@dataclass(frozen=True)
class Scenario:
    folder: Path

    @property
    def id(self) -> str:
        return f"{self.folder.parent.name}/{self.folder.name}"

    @property
    def policy_dir(self) -> Path:
        own = self.folder.parent / "policies"
        return own if own.is_dir() else REPO_ROOT / "policies"

    def review(self) -> tuple[str, dict[str, Any]]:
        """The request path and body; `_http` records what the apiserver sent beside the body."""
        review = json.loads((self.folder / "review.json").read_text())
        sent = review.pop("_http", {})
        return sent.get("path", "/mutate"), review

    def expected(self) -> dict[str, Any]:
        return yaml.safe_load((self.folder / "expected.yaml").read_text())

    def mutated(self) -> Any:
        return json.loads((self.folder / "mutated.json").read_text())


def discover() -> list[Scenario]:
    return [
        Scenario(folder)
        for folder in sorted(SCENARIO_ROOT.glob("*/*"))
        if (folder / "review.json").is_file()
    ]


SCENARIOS = discover()


@pytest.fixture(scope="module")
def clients() -> dict[Path, WebhookClient]:
    """One kept-alive client per policy set, as the apiserver keeps its connections."""
    return {}


def client_for(
    scenario: Scenario, start: StartServer, cache: dict[Path, WebhookClient]
) -> WebhookClient:
    if scenario.policy_dir not in cache:
        cache[scenario.policy_dir] = start(scenario.policy_dir).client()
    return cache[scenario.policy_dir]


def test_scenarios_were_found() -> None:
    assert len(SCENARIOS) >= 28


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(
    scenario: Scenario, webhook_server_for: StartServer, clients: dict[Path, WebhookClient]
) -> None:
    client = client_for(scenario, webhook_server_for, clients)
    path, review = scenario.review()
    expected = scenario.expected()
    path = expected.get("endpoint", path)
    reply = client.post_json(path, review)
    assert reply.status == 200, reply.body
    answer = reply.json()
    response = check_envelope(review, answer, expected)

    assert response["allowed"] is expected["allowed"], response
    if expected["allowed"]:
        assert "status" not in response
    else:
        status = response["status"]
        assert status["code"] == expected["code"]
        for fragment in expected.get("message", []):
            assert fragment in status["message"], status["message"]
    check_warnings(response, expected.get("warnings", []))
    for key, value in expected.get("auditAnnotations", {}).items():
        assert response.get("auditAnnotations", {}).get(key) == value, response

    original = review["request"]["object"]
    if not expected.get("patched", False):
        assert "patch" not in response and "patchType" not in response, decoded_patch(response)
        if expected["allowed"] and original is not None and path.startswith("/mutate"):
            assert_validate_allows(client, review, original)
        return
    assert response["patchType"] == "JSONPatch"
    patched = jsonpatch.apply_patch(original, decoded_patch(response))
    assert_same_object(patched, scenario.mutated())
    assert_second_pass_is_empty(client, review, patched)
    assert_validate_allows(client, review, patched)


def check_envelope(review: dict[str, Any], answer: dict[str, Any], expected: dict[str, Any]) -> Any:
    assert answer["kind"] == "AdmissionReview"
    assert answer["apiVersion"] == expected.get("apiVersion", review["apiVersion"])
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"]
    return response


def check_warnings(response: dict[str, Any], fragments: list[str]) -> None:
    warnings = response.get("warnings", [])
    for warning in warnings:
        assert "\n" not in warning and len(warning) < MAX_WARNING_LENGTH, warning
    for fragment in fragments:
        assert any(fragment in warning for warning in warnings), (fragment, warnings)


def decoded_patch(response: dict[str, Any]) -> Any:
    if "patch" not in response:
        return None
    return json.loads(base64.b64decode(response["patch"]))


def with_object(review: dict[str, Any], obj: Any) -> dict[str, Any]:
    again = copy.deepcopy(review)
    again["request"]["object"] = obj
    again["request"]["uid"] = review["request"]["uid"] + "-again"
    return again


def assert_second_pass_is_empty(client: WebhookClient, review: dict[str, Any], obj: Any) -> None:
    """reinvocationPolicy IfNeeded may call us again with our own output: no change then."""
    response = client.post_json("/mutate", with_object(review, obj)).json()["response"]
    assert response["allowed"] is True, response
    assert "patch" not in response, decoded_patch(response)


def assert_validate_allows(client: WebhookClient, review: dict[str, Any], obj: Any) -> None:
    response = client.post_json("/validate", with_object(review, obj)).json()["response"]
    assert response["allowed"] is True, response
    assert "patch" not in response


def assert_same_object(actual: Any, expected: Any) -> None:
    if actual != expected:
        diff = difflib.unified_diff(
            json.dumps(expected, indent=1, sort_keys=True).splitlines(),
            json.dumps(actual, indent=1, sort_keys=True).splitlines(),
            "expected",
            "patched",
            lineterm="",
        )
        pytest.fail("the patched object differs from mutated.json:\n" + "\n".join(diff))
