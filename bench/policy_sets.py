"""Policy sets of a chosen size, for timing how the decision grows with the number of policies.

A set of N policies is the shipped default plus N-1 per-team policies with the default's spec,
each at priority 10 (above the default, which matches every namespace) and each matching its
own namespaces: even-numbered teams by an exact name (`team-0002`), odd-numbered ones by a glob
(`team-0001-*`). Exact names are looked up and globs tried in turn, so the pod under test sits
in a namespace of the last team generated, which is a glob one: the policy chosen last. The
policies a namespace could match are worked out at its first admission and remembered, so
the timing is of every admission after that; the first one in a namespace pays the pass over
the globs (about 300 µs with 1,000 policies on the benchmark's machine).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SHIPPED_POLICY = Path("policies/default.yaml")
TEAM_PRIORITY = 10


@dataclass(frozen=True)
class GeneratedSet:
    size: int
    # The namespace of the pod under test, and the policy that must govern it there.
    namespace: str
    policy: str
    # A namespace of the last exact-name team, and its policy (reported, not a target).
    exact_namespace: str
    exact_policy: str


def team_name(index: int) -> str:
    return f"team-{index:04d}"


def team_namespaces(index: int) -> str:
    """The namespace pattern of team `index`: a glob for odd teams, an exact name for even."""
    name = team_name(index)
    return f"{name}-*" if index % 2 else name


def team_namespace(index: int) -> str:
    """A namespace that team `index`'s pattern matches."""
    name = team_name(index)
    return f"{name}-serve" if index % 2 else name


def team_policy(index: int, spec: dict[str, Any]) -> dict[str, Any]:
    team_spec = copy.deepcopy(spec)
    team_spec["priority"] = TEAM_PRIORITY
    team_spec["match"] = {"namespaces": [team_namespaces(index)]}
    return {
        "apiVersion": "gpu-admission.example.com/v1alpha1",
        "kind": "GPUPolicy",
        "metadata": {"name": team_name(index)},
        "spec": team_spec,
    }


def write_policy_set(size: int, directory: Path, shipped: Path = SHIPPED_POLICY) -> GeneratedSet:
    """Write a set of `size` policies into `directory` (created) and say where to put the pod."""
    if size < 1:
        raise ValueError("a policy set holds at least the shipped default")
    directory.mkdir(parents=True, exist_ok=True)
    shipped_text = shipped.read_text()
    (directory / shipped.name).write_text(shipped_text)
    default = yaml.safe_load(shipped_text)
    teams = range(1, size)
    if teams:
        documents = [team_policy(index, default["spec"]) for index in teams]
        (directory / "teams.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    last_glob = max((i for i in teams if i % 2), default=None)
    last_exact = max((i for i in teams if not i % 2), default=None)
    default_name = default["metadata"]["name"]
    return GeneratedSet(
        size=size,
        namespace=team_namespace(last_glob) if last_glob else team_namespace(size | 1),
        policy=team_name(last_glob) if last_glob else default_name,
        exact_namespace=team_namespace(last_exact) if last_exact else team_namespace(2),
        exact_policy=team_name(last_exact) if last_exact else default_name,
    )
