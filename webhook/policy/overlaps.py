"""The load-time check that exactly one policy governs any object: two policies with the same
priority that could match one object are refused, naming both.

The check is exact for names, globs and label selectors, and safe for exclusions: a pair is
kept apart by an exclusion only when one policy's `spec.exclude` provably covers the other's
`spec.match`; otherwise the pair is reported and a priority settles it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

from webhook.policy.model import Policy, split_by_exact_namespaces
from webhook.policy.problems import PolicyProblem


def overlap_problems(policies: Sequence[Policy]) -> list[PolicyProblem]:
    by_priority: dict[int, list[Policy]] = defaultdict(list)
    for policy in policies:
        by_priority[policy.priority].append(policy)
    problems: list[PolicyProblem] = []
    for group in by_priority.values():
        ordered = sorted(group, key=lambda p: (p.source, p.source_line or 0, p.name))
        for first, second in _candidate_pairs(ordered):
            if could_both_govern(first, second):
                problems.append(_problem(first, second))
    return problems


def could_both_govern(a: Policy, b: Policy) -> bool:
    if not a.match.overlaps(b.match):
        return False
    if b.exclude is not None and a.match.within(b.exclude):
        return False
    return not (a.exclude is not None and b.match.within(a.exclude))


def _candidate_pairs(group: Sequence[Policy]) -> Iterator[tuple[Policy, Policy]]:
    """The pairs worth checking, in a stable order."""
    position = {id(policy): index for index, policy in enumerate(group)}
    by_name, broad = split_by_exact_namespaces(group)
    pairs: set[tuple[int, int]] = set()
    for sharing_a_name in by_name.values():
        for i, a in enumerate(sharing_a_name):
            for b in sharing_a_name[i + 1 :]:
                pairs.add(_ordered(position[id(a)], position[id(b)]))
    for a in broad:
        for b in group:
            if a is not b:
                pairs.add(_ordered(position[id(a)], position[id(b)]))
    for i, j in sorted(pairs):
        yield group[i], group[j]


def _ordered(i: int, j: int) -> tuple[int, int]:
    return (i, j) if i < j else (j, i)


def _problem(first: Policy, second: Policy) -> PolicyProblem:
    where = f"{first.source}:{first.source_line}" if first.source_line else first.source
    return PolicyProblem(
        second.source,
        second.source_line,
        "spec.match",
        f"policy {second.name!r} could govern the same objects as policy {first.name!r} "
        f"({where}) at the same priority {second.priority}: give one a higher spec.priority, "
        "or make spec.match and spec.exclude keep them apart",
    )
