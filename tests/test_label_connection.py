"""The real server asks the Kubernetes API for namespaces only once a policy it serves selects
namespaces by label: never for the shipped policies, and as soon as a reload brings one that
does."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.support.fake_apiserver import FakeApiServer
from tests.support.server import FRACTIONAL_POD_REVIEW, REPO_ROOT, WebhookServer

REVIEW = json.loads(FRACTIONAL_POD_REVIEW.read_text())
BY_LABEL = """\
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: shared-by-label}
spec:
  priority: 10
  match:
    namespaceSelector: {matchLabels: {gpu: shared}}
"""
DEADLINE_SECONDS = 15
NO_PROXY = {name: "" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}


def test_namespaces_are_read_only_once_a_policy_selects_them_by_label(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "default.yaml").write_text((REPO_ROOT / "policies" / "default.yaml").read_text())
    with FakeApiServer(token="label-token") as api:
        api.add_namespace("team-a", {"gpu": "shared"})
        kubeconfig = api.write_kubeconfig(tmp_path / "kube" / "config")
        environment = {
            "NAMESPACE_LABELS": "kubeconfig",
            "KUBECONFIG": str(kubeconfig),
            "POLICY_RELOAD_SECONDS": "0.2",
            **NO_PROXY,
        }
        server = WebhookServer(policies, tmp_path / "certs", tmp_path / "gunicorn.log", environment)
        server.start()
        try:
            for _ in range(4):  # a fresh connection each time, so both workers answer some
                client = server.client()
                try:
                    reply = client.post_json("/mutate", REVIEW)
                finally:
                    client.close()
                assert reply.status == 200 and reply.json()["response"]["allowed"] is True
            assert api.requests() == [], server.log()[-2000:]

            (policies / "by-label.yaml").write_text(BY_LABEL)
            deadline = time.monotonic() + DEADLINE_SECONDS
            while len(api.lists()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            # Each worker connects on its own reload: two lists of the namespaces.
            assert len(api.lists()) >= 2, server.log()[-3000:]
        finally:
            server.stop()
