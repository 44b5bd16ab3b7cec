"""Tolerations and node selector entries given to GPU pods, merged into what they have."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from webhook.engine.findings import Violation
from webhook.engine.patch import PatchRecorder
from webhook.engine.pod_spec import MalformedObject, PodView
from webhook.engine.workloads import Path
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


def node_selector_conflicts(
    pod: PodView, entries: Mapping[str, str], why: str, gone: Collection[str] = ()
) -> list[Violation]:
    """Entries the pod sets otherwise; those of `gone` (being removed) do not count."""
    present = {key: value for key, value in pod.node_selector().items() if key not in gone}
    return [
        Violation(
            "node-selector-conflict",
            f'nodeSelector {key}="{present[key]}" conflicts with {key}="{value}" that {why} '
            "requires: remove it from the pod",
        )
        for key, value in entries.items()
        if key in present and present[key] != value
    ]


def runtime_class_conflict(present: str, wanted: str, why: str) -> Violation:
    return Violation(
        "runtime-class-conflict",
        f'runtimeClassName "{present}" conflicts with "{wanted}" that {why} requires: write '
        f'"{wanted}", or remove it from the pod',
    )


def merge_node_selector(
    recorder: PatchRecorder, pod: PodView, entries: Mapping[str, str], gone: Collection[str] = ()
) -> dict[str, str]:
    """Add the entries the pod lacks (those of `gone` are being removed); those added are
    returned."""
    path = (*pod.location.spec, "nodeSelector")
    present = {key: value for key, value in pod.node_selector().items() if key not in gone}
    added = {}
    for key, value in entries.items():
        if key not in present:
            recorder.put((*path, key), value)
            added[key] = value
    return added


def merge_tolerations(
    recorder: PatchRecorder, pod: PodView, tolerations: Iterable[Toleration]
) -> list[Toleration]:
    """Add each toleration the pod does not already have, or one that tolerates as much; those
    added are returned."""
    path = (*pod.location.spec, "tolerations")
    present = [_checked(t, (*path, index)) for index, t in enumerate(pod.tolerations())]
    added: list[Toleration] = []
    for toleration in tolerations:
        wanted = _checked(toleration, path)
        if not any(_covers(existing, wanted) for existing in present):
            recorder.append(path, dict(toleration))
            present.append(wanted)
            added.append(toleration)
    return added


def still_present_tolerations(
    pod: PodView, recorded: Iterable[Toleration], wanted: Iterable[Toleration]
) -> list[Toleration]:
    """The recorded tolerations that are still wanted and still in the pod as written."""
    path = (*pod.location.spec, "tolerations")
    present = {_checked(t, (*path, index)) for index, t in enumerate(pod.tolerations())}
    wanted_fields = {_checked(t, path) for t in wanted}
    return [t for t in recorded if _checked(t, path) in present & wanted_fields]


def remove_tolerations(
    recorder: PatchRecorder,
    pod: PodView,
    recorded: Iterable[Toleration],
    wanted: Iterable[Toleration],
) -> list[str]:
    """Remove the recorded tolerations (the webhook added them) that nothing wants now, as long
    as they still read as written. One that tolerates a wanted taint stays, so that what is
    merged after this sees the pod as it will be. The keys of those removed are returned."""
    path = (*pod.location.spec, "tolerations")
    wanted_fields = [_checked(t, path) for t in wanted]
    gone = {_checked(t, path) for t in recorded} - set(wanted_fields)
    removed: list[tuple[int, str]] = []
    for index, toleration in enumerate(pod.tolerations()):
        fields = _checked(toleration, (*path, index))
        if fields in gone and not any(_covers(fields, w) for w in wanted_fields):
            removed.append((index, fields[0]))
    for index, _ in reversed(removed):
        recorder.remove((*path, index))
    return [key for _, key in removed]


def stale_selector_keys(
    pod: PodView, recorded: Mapping[str, str], wanted: Mapping[str, str]
) -> list[str]:
    """The recorded nodeSelector entries nothing wants now that still hold the value the
    webhook wrote: those it removes."""
    present = pod.node_selector()
    return [
        key
        for key, value in recorded.items()
        if present.get(key) == value and wanted.get(key) != value
    ]


_Fields = tuple[str, str, str, str, object]


def _checked(toleration: Any, path: Path) -> _Fields:
    """(key, operator, value, effect, tolerationSeconds) with the API's defaults filled in."""
    if not isinstance(toleration, Mapping):
        raise MalformedObject(path, "a toleration must be an object")
    fields = []
    for name, default in (("key", ""), ("operator", "Equal"), ("value", ""), ("effect", "")):
        value = toleration.get(name) or default
        if not isinstance(value, str):
            raise MalformedObject((*path, name), "must be a string")
        fields.append(value)
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        raise MalformedObject((*path, "tolerationSeconds"), "must be a whole number")
    key, operator, value, effect = fields
    return key, operator, value, effect, seconds


def _covers(existing: _Fields, wanted: _Fields) -> bool:
    """Whether a pod with `existing` already tolerates every taint `wanted` tolerates."""
    key, operator, value, effect, seconds = existing
    if existing == wanted:
        return True
    if wanted[4] is not None or seconds is not None:
        return False  # time limits only compare as they are written
    if effect and effect != wanted[3]:
        return False
    if operator == "Exists":
        return not key or key == wanted[0]
    return wanted[1] == "Equal" and (key, value) == (wanted[0], wanted[2])
