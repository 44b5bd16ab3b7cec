"""The namespace label source connects only once a loaded policy needs labels."""

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from webhook.kube.on_demand_labels import OnDemandLabelSource
from webhook.policy.namespace_labels import LabelLookup, NamespaceLabelSource
from webhook.policy.policy_set import PolicySet
from webhook.policy.store import ReloadStatus, ServedSet

REPO_ROOT = Path(__file__).resolve().parents[2]
BY_LABEL = """\
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: by-label}
spec:
  match:
    namespaceSelector: {matchLabels: {gpu: shared}}
"""


class Recorded:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def labels_of(self, namespace: str) -> LabelLookup:
        self.asked.append(namespace)
        return LabelLookup.known({"gpu": "shared"})


class Connections:
    def __init__(self, seconds: float = 0.0) -> None:
        self.modes: list[str] = []
        self.source = Recorded()
        # How long connecting takes: long enough, and threads asking at once all get in
        # unless connecting is done under a lock.
        self.seconds = seconds

    def __call__(self, mode: str) -> NamespaceLabelSource:
        self.modes.append(mode)
        time.sleep(self.seconds)
        return self.source


def served(policy_set: PolicySet) -> ServedSet:
    return ServedSet(policy_set, None, datetime.now(UTC), "given")


def test_a_set_without_label_selectors_never_connects(tmp_path: Path) -> None:
    connections = Connections()
    source = OnDemandLabelSource("auto", connections)
    shipped = PolicySet.load(REPO_ROOT / "policies")
    assert not shipped.needs_namespace_labels
    source.policies_observed(None, served(shipped), ReloadStatus())
    assert connections.modes == [] and not source.is_connected


def test_a_set_that_selects_by_label_connects_when_loaded(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(BY_LABEL)
    connections = Connections()
    source = OnDemandLabelSource("kubeconfig", connections)
    source.policies_observed("success", served(PolicySet.load(tmp_path)), ReloadStatus())
    assert connections.modes == ["kubeconfig"]
    assert source.labels_of("team-a") == LabelLookup.known({"gpu": "shared"})
    assert connections.source.asked == ["team-a"] and connections.modes == ["kubeconfig"]


def test_the_first_question_connects_once_whatever_the_threads() -> None:
    connections = Connections(seconds=0.05)
    source = OnDemandLabelSource("auto", connections)
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        source.labels_of("team-a")

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert connections.modes == ["auto"] and len(connections.source.asked) == 8


def test_an_unknown_mode_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="'sometimes' is not one of"):
        OnDemandLabelSource("sometimes", Connections())


def test_serving_loads_no_kubernetes_client_until_labels_are_needed() -> None:
    # The app built and a GPU review answered, as a worker does, with the shipped policies.
    script = """
import sys
from pathlib import Path
from webhook.server.app import create_app
from webhook.server.settings import Settings
app = create_app(Settings(policy_dir=Path("policies"), policy_reload_seconds=0))
body = Path("examples/review-fractional-pod.json").read_bytes()
reply = app.test_client().post("/mutate", data=body, content_type="application/json")
assert reply.get_json()["response"]["patch"], reply.get_json()
print('kubernetes' in sys.modules)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
