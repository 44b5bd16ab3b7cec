"""env_plan.py: the variables a container with a share is given, decided before anything is
written: added, set, kept or taken away, and the user's own values kept or, where the policy
enforces a template, refused."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest

from tests.unit.engine.builders import T4, sharing, sized
from webhook.engine.env_plan import (
    EnvAction,
    EnvChange,
    entry_key,
    plan_env,
    split_entries,
    stored_env_violations,
    without_entry,
    without_ours,
)
from webhook.engine.findings import Violation
from webhook.policy.model import EnvTemplate

# A quarter of a T4: 3840 MiB, fraction 0.25.
LIMIT = EnvTemplate("LIMIT", "{mib}")
ENFORCED = EnvTemplate("LIMIT", "{mib}", enforce=True)
JAX = EnvTemplate(
    "XLA_CLIENT_MEM_FRACTION", "{fraction}", unless_set=("XLA_PYTHON_CLIENT_MEM_FRACTION",)
)
KEY = "per_process_memory_fraction"
TORCH = EnvTemplate(
    "PYTORCH_CUDA_ALLOC_CONF",
    f"{KEY}:{{fraction}}",
    merge_key=KEY,
    also_named=("PYTORCH_ALLOC_CONF",),
)
ENTRY = f"{KEY}:0.25"


def env(**values: str) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in values.items()]


def planned(
    templates: tuple[EnvTemplate, ...],
    present: list[Any] | None,
    managed: Collection[str] = (),
    entries: dict[str, str] | None = None,
) -> tuple[list[EnvChange], list[Violation]]:
    fields = {} if present is None else {"env": present}
    share = sized(3840, T4, **fields)
    return plan_env(share, sharing(env=templates), "pool", managed, 15360, entries or {})


def wrong(name: str, found: str, value: str) -> Violation:
    return Violation(
        "env-enforced",
        f'container "c": env {name} {found}, but policy "pool" sets it to "{value}" for its share '
        "of the GPU: remove it from the pod",
    )


def test_env_change_defaults_to_a_whole_variable_the_webhook_owns() -> None:
    change = EnvChange("add", "A")
    assert (change.value, change.index, change.enforce, change.found) == ("", -1, False, None)
    assert (change.owned, change.merge_key, change.entry) == (True, None, "")


# plan_env: a variable of its own --------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "present", "managed", "changes", "violations"),
    [
        (LIMIT, None, set(), [EnvChange("add", "LIMIT", "3840")], []),
        (ENFORCED, None, set(), [EnvChange("add", "LIMIT", "3840", enforce=True)], []),
        (
            LIMIT,
            env(LIMIT="3840"),
            {"LIMIT"},
            [EnvChange("keep", "LIMIT", "3840", 0, False, {"name": "LIMIT", "value": "3840"})],
            [],
        ),
        (
            LIMIT,
            env(OTHER="x", LIMIT="1"),
            {"LIMIT"},
            [EnvChange("set", "LIMIT", "3840", 1, False, {"name": "LIMIT", "value": "1"})],
            [],
        ),
        (
            LIMIT,
            [{"name": "LIMIT", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}],
            {"LIMIT"},
            [
                EnvChange(
                    "set",
                    "LIMIT",
                    "3840",
                    0,
                    False,
                    {"name": "LIMIT", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}},
                )
            ],
            [],
        ),
        (LIMIT, env(LIMIT="1"), set(), [], []),
        (ENFORCED, env(LIMIT="3840"), set(), [], []),
        (ENFORCED, env(LIMIT="1"), set(), [], [wrong("LIMIT", 'is "1"', "3840")]),
        (
            ENFORCED,
            [{"name": "LIMIT", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
            set(),
            [],
            [wrong("LIMIT", "is set from a reference", "3840")],
        ),
        (
            LIMIT,
            env(LIMIT="1") + env(LIMIT="2"),
            {"LIMIT"},
            [EnvChange("set", "LIMIT", "3840", 0, False, {"name": "LIMIT", "value": "1"})],
            [],
        ),
        (
            ENFORCED,
            [{"name": "LIMIT", "value": "3840", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
            set(),
            [],
            [wrong("LIMIT", "is set from a reference", "3840")],
        ),
        (
            LIMIT,
            [{"name": "LIMIT", "value": "3840", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
            {"LIMIT"},
            [
                EnvChange(
                    "set",
                    "LIMIT",
                    "3840",
                    0,
                    False,
                    {
                        "name": "LIMIT",
                        "value": "3840",
                        "valueFrom": {"fieldRef": {"fieldPath": "x"}},
                    },
                )
            ],
            [],
        ),
    ],
    ids=[
        "added where absent",
        "added, and enforced",
        "kept where the webhook set it right",
        "set where the webhook set it and the share changed",
        "set where the webhook's variable now reads a reference",
        "the user's own value stays",
        "the user's right value needs nothing",
        "the user's wrong value of an enforced one is refused",
        "a reference in place of an enforced value is refused",
        "the first of two entries of one name is the one read",
        "a reference beside the right value of an enforced one is refused",
        "set where the webhook's variable reads a reference beside the right value",
    ],
)
def test_plan_env_judges_a_template_against_what_the_container_has(
    template: EnvTemplate,
    present: list[Any] | None,
    managed: set[str],
    changes: list[EnvChange],
    violations: list[Violation],
) -> None:
    assert planned((template,), present, managed) == (changes, violations)


@pytest.mark.parametrize(
    ("template", "present", "managed", "changes", "violations"),
    [
        (JAX, env(XLA_PYTHON_CLIENT_MEM_FRACTION="0.5"), set(), [], []),
        (
            EnvTemplate(JAX.name, JAX.value, enforce=True, unless_set=JAX.unless_set),
            env(XLA_PYTHON_CLIENT_MEM_FRACTION="0.5"),
            set(),
            [],
            [
                Violation(
                    "env-enforced",
                    'container "c": env XLA_PYTHON_CLIENT_MEM_FRACTION stands in for '
                    'XLA_CLIENT_MEM_FRACTION, which policy "pool" sets for its share of the GPU: '
                    "remove XLA_PYTHON_CLIENT_MEM_FRACTION",
                )
            ],
        ),
        (
            JAX,
            env(XLA_CLIENT_MEM_FRACTION="0.25", XLA_PYTHON_CLIENT_MEM_FRACTION="0.5"),
            {"XLA_CLIENT_MEM_FRACTION"},
            [EnvChange("remove", "XLA_CLIENT_MEM_FRACTION", index=0, owned=False)],
            [],
        ),
        (
            JAX,
            env(XLA_PYTHON_CLIENT_MEM_FRACTION="0.5"),
            {"XLA_PYTHON_CLIENT_MEM_FRACTION"},
            [],
            [],
        ),
    ],
    ids=[
        "a variable that stands in for it leaves it out",
        "and is refused where it is enforced",
        "the webhook's own goes where the user set the other",
        "the variable it defers to is never taken for a stale one of ours",
    ],
)
def test_plan_env_defers_to_a_variable_set_in_its_place(
    template: EnvTemplate,
    present: list[Any],
    managed: set[str],
    changes: list[EnvChange],
    violations: list[Violation],
) -> None:
    assert planned((template,), present, managed) == (changes, violations)


@pytest.mark.parametrize(
    ("present", "managed", "entries", "changes"),
    [
        (env(GONE="1"), {"GONE"}, None, [EnvChange("remove", "GONE", index=0, owned=False)]),
        (
            env(A="x", GONE="a:1,k:v"),
            {"GONE"},
            {"GONE": "k"},
            [EnvChange("set", "GONE", "a:1", 1, owned=False)],
        ),
        (
            env(GONE="k:v"),
            {"GONE"},
            {"GONE": "k"},
            [EnvChange("remove", "GONE", index=0, owned=False)],
        ),
        (None, {"GONE"}, None, []),
    ],
    ids=[
        "a variable the webhook set and the policy gives no more",
        "only the webhook's entry of a list",
        "a list of only the webhook's entry",
        "nothing where the container no longer has it",
    ],
)
def test_plan_env_takes_away_what_the_policy_no_longer_gives(
    present: list[Any] | None,
    managed: set[str],
    entries: dict[str, str] | None,
    changes: list[EnvChange],
) -> None:
    assert planned((), present, managed, entries) == (changes, [])


def test_plan_env_fills_the_placeholders_from_the_share() -> None:
    template = EnvTemplate("SHARE", "{amount}{unit}={fraction}/{frameworkMiB}:{model}")
    changes, _ = planned((template,), None)
    assert [c.value for c in changes] == ["3840MiB=0.25/3328:Tesla-T4"]


# plan_env: an entry of a list ----------------------------------------------------------------


def merged(action: EnvAction, text: str, index: int, found: Any, owned: bool = True) -> EnvChange:
    return EnvChange(action, found["name"], text, index, False, found, owned, KEY, ENTRY)


@pytest.mark.parametrize(
    ("present", "managed", "changes", "violations"),
    [
        (None, set(), [EnvChange("add", TORCH.name, ENTRY, merge_key=KEY, entry=ENTRY)], []),
        (
            env(PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"),
            set(),
            [
                merged(
                    "set",
                    f"expandable_segments:True,{ENTRY}",
                    0,
                    {"name": TORCH.name, "value": "expandable_segments:True"},
                )
            ],
            [],
        ),
        (
            env(PYTORCH_CUDA_ALLOC_CONF=""),
            set(),
            [merged("set", ENTRY, 0, {"name": TORCH.name, "value": ""})],
            [],
        ),
        (
            env(PYTORCH_CUDA_ALLOC_CONF=f"a:1,{ENTRY}"),
            set(),
            [
                merged(
                    "keep", f"a:1,{ENTRY}", 0, {"name": TORCH.name, "value": f"a:1,{ENTRY}"}, False
                )
            ],
            [],
        ),
        (
            env(PYTORCH_CUDA_ALLOC_CONF=f"a:1,{KEY}:0.9,b:2"),
            {TORCH.name},
            [
                merged(
                    "set",
                    f"a:1,{ENTRY},b:2",
                    0,
                    {"name": TORCH.name, "value": f"a:1,{KEY}:0.9,b:2"},
                )
            ],
            [],
        ),
        (env(PYTORCH_CUDA_ALLOC_CONF=f"{KEY}:0.9"), set(), [], []),
        (
            env(PYTORCH_ALLOC_CONF="expandable_segments:True"),
            set(),
            [
                merged(
                    "set",
                    f"expandable_segments:True,{ENTRY}",
                    0,
                    {"name": "PYTORCH_ALLOC_CONF", "value": "expandable_segments:True"},
                )
            ],
            [],
        ),
        (
            env(PYTORCH_ALLOC_CONF="a:1", PYTORCH_CUDA_ALLOC_CONF="b:2"),
            set(),
            [merged("set", f"b:2,{ENTRY}", 1, {"name": TORCH.name, "value": "b:2"})],
            [],
        ),
    ],
    ids=[
        "added where absent",
        "merged beside the user's entries",
        "written into an empty list",
        "kept where the list has it, and not the webhook's to take away",
        "updated in place where the webhook wrote it",
        "the user's own value for the key stays",
        "written under the other name the container uses",
        "the first name where the container sets both",
    ],
)
def test_plan_env_merges_its_entry_into_a_list(
    present: list[Any] | None,
    managed: set[str],
    changes: list[EnvChange],
    violations: list[Violation],
) -> None:
    assert planned((TORCH,), present, managed) == (changes, violations)


@pytest.mark.parametrize(
    ("present", "found"),
    [
        (env(PYTORCH_CUDA_ALLOC_CONF=f"{KEY}:0.9"), f'is "{KEY}:0.9"'),
        ([{"name": TORCH.name, "valueFrom": {"fieldRef": {}}}], "is set from a reference"),
    ],
    ids=["the user's value for the key", "a reference"],
)
def test_plan_env_refuses_what_hides_an_enforced_entry(present: list[Any], found: str) -> None:
    enforced = EnvTemplate(TORCH.name, TORCH.value, enforce=True, merge_key=KEY)
    assert planned((enforced,), present) == ([], [wrong(TORCH.name, found, ENTRY)])


# The list helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("a:1,b:2", ["a:1", "b:2"]),
        ("a:1,,b:2,", ["a:1", "b:2"]),
        ("a:1, b:2", ["a:1", " b:2"]),
        (" , ", []),
        ("", []),
    ],
    ids=[
        "two entries",
        "empty ones dropped",
        "spaces kept as written",
        "blank ones dropped",
        "none",
    ],
)
def test_split_entries(text: str, entries: list[str]) -> None:
    assert split_entries(text) == entries


@pytest.mark.parametrize(
    ("entry", "key"),
    [("a:1", "a"), (" b : 2", "b"), ("c", "c"), ("d:e:f", "d")],
    ids=["before the colon", "stripped", "an entry without a value", "the first colon only"],
)
def test_entry_key(entry: str, key: str) -> None:
    assert entry_key(entry) == key


@pytest.mark.parametrize(
    ("text", "key", "rest"),
    [
        ("a:1,k:v,b:2", "k", "a:1,b:2"),
        ("k:v", "k", ""),
        ("a:1", "k", "a:1"),
        ("a:1, k:v,", "k", "a:1"),
    ],
    ids=["from between others", "the only one", "absent", "written with a space"],
)
def test_without_entry(text: str, key: str, rest: str) -> None:
    assert without_entry(text, key) == rest


@pytest.mark.parametrize(
    ("merge_key", "item", "change"),
    [
        (None, {"name": "X", "value": "1"}, EnvChange("remove", "X", index=3, owned=False)),
        ("k", {"name": "X", "value": "a:1,k:v"}, EnvChange("set", "X", "a:1", 3, owned=False)),
        ("k", {"name": "X", "value": "k:v"}, EnvChange("remove", "X", index=3, owned=False)),
        ("k", {"name": "X", "valueFrom": {}}, EnvChange("remove", "X", index=3, owned=False)),
    ],
    ids=[
        "the whole variable",
        "only the webhook's entry of a list",
        "a list left empty goes",
        "a reference goes",
    ],
)
def test_without_ours(merge_key: str | None, item: dict[str, Any], change: EnvChange) -> None:
    assert without_ours("X", merge_key, 3, item) == change


def test_stored_env_violations_are_the_enforced_changes_still_to_make() -> None:
    changes = [
        EnvChange("add", "A", "1", enforce=True),
        EnvChange("set", "B", "2", 0, True, {"name": "B", "value": "9"}),
        EnvChange("keep", "C", "3", 1, True, {"name": "C", "value": "3"}),
        EnvChange("add", "D", "4"),
        EnvChange("add", "P", "k:v", enforce=True, merge_key="k", entry="k:v"),
        EnvChange("remove", "E", index=2, owned=False),
    ]
    assert stored_env_violations(sized(3840), changes, "pool") == [
        Violation(
            "env-enforced",
            'container "c": env A is not set, but policy "pool" sets it to "1" for its share of '
            'the GPU: set it to "1"',
        ),
        wrong("B", 'is "9"', "2"),
        Violation(
            "env-enforced",
            'container "c": env P lacks k:v, which policy "pool" sets for its share of the GPU: '
            "add it to the list",
        ),
    ]
