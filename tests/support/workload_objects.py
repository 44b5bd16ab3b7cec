"""Objects a fake cluster holds, built alike wherever tests list them."""

from __future__ import annotations

from typing import Any


def deployment_of(name: str, namespace: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A Deployment whose pods (labelled app=<name>) have this spec."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }
