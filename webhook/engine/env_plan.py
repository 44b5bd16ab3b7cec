"""The variables a container with a share is given, decided before anything is written.

Each template of the policy becomes one change (add, set, remove, or keep as it is), judged
against what the container has and which names the webhook set before (`managed`). A value
the user set stays theirs; where the template is enforced and the user's value is wrong, that
is a violation in every mode. A variable missing or stale is a change when mutating and, for
an enforced template, a violation when validating the object as stored."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Literal

from webhook.engine.findings import Violation
from webhook.engine.shares import SizedShare, placeholder_values
from webhook.policy.model import EnvTemplate, Sharing

EnvAction = Literal["add", "set", "remove", "keep"]


# Made for every pod judged: slots rather than frozen, whose __init__ costs more.
@dataclass(slots=True)
class EnvChange:
    action: EnvAction
    name: str
    value: str = ""
    # Where the variable is in the container's env, for set and remove.
    index: int = -1
    enforce: bool = False
    found: Mapping[str, Any] | None = None
    # Whether the webhook manages the variable (or, with `merge_key`, its entry in it) after.
    owned: bool = True
    merge_key: str | None = None
    # With `merge_key`: the `key:value` entry the webhook owns in the list.
    entry: str = ""


def plan_env(
    share: SizedShare,
    sharing: Sharing,
    policy_name: str,
    managed: Collection[str],
    seen_mib: int,
    managed_entries: Mapping[str, str] = MappingProxyType({}),
) -> tuple[list[EnvChange], list[Violation]]:
    """`seen_mib`: the device memory a process of the container sees (placeholder_values);
    `managed_entries`: of the `managed` variables, those where the webhook owns one entry of a
    list, and its key. A managed variable the policy gives no more is taken away."""
    container = share.intent.container
    present: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for index, item in enumerate(container.env()):
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            present.setdefault(item["name"], (index, item))
    values = placeholder_values(share, sharing, seen_mib)
    changes: list[EnvChange] = []
    violations: list[Violation] = []
    given: set[str] = set()
    for written in sharing.env:
        template = _named_as_set(written, present)
        # The variables a template defers to are the user's to keep, never stale ones of ours.
        given.update((template.name, *template.unless_set))
        value = template.value.format_map(values)
        existing = present.get(template.name)
        replaced_by = next((name for name in template.unless_set if name in present), None)
        if replaced_by is not None:
            if template.enforce:
                violations.append(_env_replaced(share, template, replaced_by, policy_name))
            elif existing is not None and template.name in managed:
                changes.append(without_ours(template.name, template.merge_key, *existing))
            continue
        if template.merge_key is not None:
            change, violation = _merged(share, template, value, existing, managed, policy_name)
            changes.extend(change)
            violations.extend(violation)
            continue
        if existing is None:
            changes.append(EnvChange("add", template.name, value, enforce=template.enforce))
            continue
        index, item = existing
        right = item.get("value") == value and "valueFrom" not in item
        if template.name in managed:
            action: EnvAction = "keep" if right else "set"
            changes.append(EnvChange(action, template.name, value, index, template.enforce, item))
        elif not right and template.enforce:
            violations.append(_env_wrong(share, template, item, value, policy_name))
    for name in sorted(set(managed) - given):
        if name in present:
            changes.append(without_ours(name, managed_entries.get(name), *present[name]))
    return changes, violations


def _named_as_set(template: EnvTemplate, present: Mapping[str, object]) -> EnvTemplate:
    """The template under the name the container uses: one of its other names where the
    container sets that one and not the first."""
    if template.name in present or not template.also_named:
        return template
    name = next((other for other in template.also_named if other in present), template.name)
    return template if name == template.name else replace(template, name=name)


def _merged(
    share: SizedShare,
    template: EnvTemplate,
    value: str,
    existing: tuple[int, Mapping[str, Any]] | None,
    managed: Collection[str],
    policy_name: str,
) -> tuple[list[EnvChange], list[Violation]]:
    """The template's `key:value` entry in a comma-separated list: added where the list lacks
    the key, updated where the webhook wrote it, and a value the user gave it kept (denied when
    enforced). The list's other entries are never touched."""
    key = template.merge_key
    name, enforce = template.name, template.enforce
    if existing is None:
        return [EnvChange("add", name, value, enforce=enforce, merge_key=key, entry=value)], []
    index, item = existing
    text = item.get("value") or ""
    if "valueFrom" in item or not isinstance(text, str):
        wrong = [_env_wrong(share, template, item, value, policy_name)] if enforce else []
        return [], wrong
    entries = split_entries(text)
    ours = next((i for i, entry in enumerate(entries) if entry_key(entry) == key), None)
    if ours is not None and entries[ours] == value:
        owned = name in managed
        return [EnvChange("keep", name, text, index, enforce, item, owned, key, value)], []
    if ours is None or name in managed:
        if ours is None:
            entries.append(value)
        else:
            entries[ours] = value
        text = ",".join(entries)
        return [EnvChange("set", name, text, index, enforce, item, True, key, value)], []
    return [], [_env_wrong(share, template, item, value, policy_name)] if enforce else []


def split_entries(text: str) -> list[str]:
    return [entry for entry in text.split(",") if entry.strip()]


def entry_key(entry: str) -> str:
    return entry.split(":", 1)[0].strip()


def without_entry(text: str, key: str) -> str:
    """A `key:value,...` list without the entry of `key`."""
    return ",".join(entry for entry in split_entries(text) if entry_key(entry) != key)


def without_ours(
    name: str, merge_key: str | None, index: int, item: Mapping[str, Any]
) -> EnvChange:
    """Take away what the webhook set: the variable, or only its entry in a list."""
    if merge_key is not None and isinstance(item.get("value"), str):
        rest = without_entry(item["value"], merge_key)
        if rest:
            return EnvChange("set", name, rest, index, owned=False)
    return EnvChange("remove", name, index=index, owned=False)


def stored_env_violations(
    share: SizedShare, changes: list[EnvChange], policy_name: str
) -> list[Violation]:
    """What an enforced template finds wrong in the object as stored."""
    return [
        _entry_missing(share, change, policy_name)
        if change.merge_key is not None
        else _env_wrong(share, change, change.found, change.value, policy_name)
        for change in changes
        if change.enforce and change.action in ("add", "set")
    ]


def _entry_missing(share: SizedShare, change: EnvChange, policy_name: str) -> Violation:
    return Violation(
        "env-enforced",
        f"{share.intent.container.label}: env {change.name} lacks {change.entry}, which "
        f'policy "{policy_name}" sets for its share of the GPU: add it to the list',
    )


def _env_replaced(
    share: SizedShare, template: EnvTemplate, replaced_by: str, policy_name: str
) -> Violation:
    return Violation(
        "env-enforced",
        f"{share.intent.container.label}: env {replaced_by} stands in for {template.name}, "
        f'which policy "{policy_name}" sets for its share of the GPU: remove {replaced_by}',
    )


def _env_wrong(
    share: SizedShare,
    template: EnvTemplate | EnvChange,
    existing: Mapping[str, Any] | None,
    value: str,
    policy_name: str,
) -> Violation:
    label = share.intent.container.label
    what = f'policy "{policy_name}" sets it to "{value}" for its share of the GPU'
    if existing is None:
        return Violation(
            "env-enforced",
            f'{label}: env {template.name} is not set, but {what}: set it to "{value}"',
        )
    found = (
        "is set from a reference"
        if "valueFrom" in existing
        else f'is "{existing.get("value") or ""}"'
    )
    return Violation(
        "env-enforced",
        f"{label}: env {template.name} {found}, but {what}: remove it from the pod",
    )
