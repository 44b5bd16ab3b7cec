"""The load-time check that exactly one policy governs any object: two policies with the same
priority that could match one object are refused, naming both.

The check is exact for names, globs and label selectors, and safe for exclusions: a pair is
kept apart by an exclusion only when one policy's `spec.exclude` provably covers the other's
`spec.match`; otherwise the pair is reported and a priority settles it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence

from webhook.policy.model import Policy
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
    """The pairs whose namespaces could meet, in a stable order.

    Two patterns can match one name only if one's literal prefix (its text up to the first
    wildcard) starts with the other's, and two exact names only if they are equal. So each
    pattern is paired with the open patterns (globs, or no names at all) filed under one of its
    own prefix's prefixes, and an exact name with the exact names equal to it: a thousand
    per-team policies meet a handful of candidates each, not a thousand.
    """
    open_by_prefix: dict[str, list[int]] = defaultdict(list)
    exact_by_name: dict[str, list[int]] = defaultdict(list)
    prefixes_of = [_literal_prefixes(policy) for policy in group]
    for index, prefixes in enumerate(prefixes_of):
        for prefix, is_open in prefixes:
            (open_by_prefix if is_open else exact_by_name)[prefix].append(index)
    pairs: set[tuple[int, int]] = set()
    for index, prefixes in enumerate(prefixes_of):
        for prefix, is_open in prefixes:
            partners = [] if is_open else list(exact_by_name.get(prefix, ()))
            for end in range(len(prefix) + 1):
                partners.extend(open_by_prefix.get(prefix[:end], ()))
            pairs.update(_ordered(index, partner) for partner in partners if partner != index)
    for i, j in sorted(pairs):
        yield group[i], group[j]


def _literal_prefixes(policy: Policy) -> tuple[tuple[str, bool], ...]:
    names = policy.match.namespaces
    return (("", True),) if names is None else names.literal_prefixes()


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
