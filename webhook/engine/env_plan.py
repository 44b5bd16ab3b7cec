"""The variables a container with a share is given, decided before anything is written.

Each template of the policy becomes one change (add, set, remove, or keep as it is), judged
against what the container has and which names the webhook set before (`managed`). A value
the user set stays theirs; where the template is enforced and the user's value is wrong, that
is a violation in every mode. A variable missing or stale is a change when mutating and, for
an enforced template, a violation when validating the object as stored."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.engine.findings import Violation
from webhook.engine.shares import SizedShare, placeholder_values
from webhook.policy.model import EnvTemplate, Sharing

EnvAction = Literal["add", "set", "remove", "keep"]


@dataclass(frozen=True)
class EnvChange:
    action: EnvAction
    name: str
    value: str = ""
    # Where the variable is in the container's env, for set and remove.
    index: int = -1
    enforce: bool = False
    found: Mapping[str, Any] | None = None

    @property
    def managed(self) -> bool:
        """Whether the webhook manages the variable after this change."""
        return self.action in ("add", "set", "keep")


def plan_env(
    share: SizedShare, sharing: Sharing, policy_name: str, managed: Collection[str]
) -> tuple[list[EnvChange], list[Violation]]:
    container = share.intent.container
    present: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for index, item in enumerate(container.env()):
        if isinstance(item, Mapping) and isinstance(item.get("name"), str):
            present.setdefault(item["name"], (index, item))
    values = placeholder_values(share, sharing)
    changes: list[EnvChange] = []
    violations: list[Violation] = []
    for template in sharing.env:
        value = template.value.format_map(values)
        existing = present.get(template.name)
        replaced_by = next((name for name in template.unless_set if name in present), None)
        if replaced_by is not None:
            if template.enforce:
                violations.append(_env_replaced(share, template, replaced_by, policy_name))
            elif existing is not None and template.name in managed:
                changes.append(EnvChange("remove", template.name, index=existing[0]))
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
    return changes, violations


def stored_env_violations(
    share: SizedShare, changes: list[EnvChange], policy_name: str
) -> list[Violation]:
    """What an enforced template finds wrong in the object as stored."""
    return [
        _env_wrong(share, change, change.found, change.value, policy_name)
        for change in changes
        if change.enforce and change.action in ("add", "set")
    ]


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
