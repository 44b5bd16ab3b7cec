"""Tolerations and node selector entries given to GPU pods, merged into what they have."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.engine.findings import Violation
from webhook.engine.patch import PatchRecorder
from webhook.engine.pod_spec import PodView
from webhook.policy.model import Placement, Toleration


def resource_toleration(resource: str) -> dict[str, str]:
    """The toleration the apiserver's ExtendedResourceToleration plugin adds for a resource.
    That plugin runs before webhooks (and is off by default), so it never sees a resource we
    add."""
    return {"key": resource, "operator": "Exists", "effect": "NoSchedule"}


def wanted_tolerations(placement: Placement, resources: Iterable[str]) -> list[Toleration]:
    wanted: list[Toleration] = []
    if placement.resource_tolerations:
        wanted.extend(resource_toleration(resource) for resource in sorted(set(resources)))
    wanted.extend(placement.tolerations)
    return wanted


def node_selector_conflicts(pod: PodView, entries: Mapping[str, str], why: str) -> list[Violation]:
    present = pod.node_selector()
    return [
        Violation(
            "node-selector-conflict",
            f'nodeSelector {key}="{present[key]}" conflicts with {key}="{value}" that {why} '
            "requires: remove it from the pod",
        )
        for key, value in entries.items()
        if key in present and present[key] != value
    ]


def merge_node_selector(recorder: PatchRecorder, pod: PodView, entries: Mapping[str, str]) -> None:
    path = (*pod.location.spec, "nodeSelector")
    present = pod.node_selector()
    for key, value in entries.items():
        if key not in present:
            recorder.put((*path, key), value)


def merge_tolerations(
    recorder: PatchRecorder, pod: PodView, tolerations: Iterable[Toleration]
) -> None:
    present = {_normalised(t) for t in pod.tolerations() if isinstance(t, Mapping)}
    path = (*pod.location.spec, "tolerations")
    for toleration in tolerations:
        key = _normalised(toleration)
        if key not in present:
            recorder.append(path, dict(toleration))
            present.add(key)


def _normalised(toleration: Mapping[str, Any]) -> tuple[object, ...]:
    """Two tolerations that the scheduler treats alike compare equal (defaults filled in)."""
    return (
        toleration.get("key") or "",
        toleration.get("operator") or "Equal",
        toleration.get("value") or "",
        toleration.get("effect") or "",
        toleration.get("tolerationSeconds"),
    )
