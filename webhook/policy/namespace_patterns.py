"""Namespace names and globs (`ml-*`, `team-?`) as a policy lists them.

`kube-system` is matched only where it is named exactly: a glob never matches it, so a
policy written for team namespaces never reaches the cluster's own components by accident.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PROTECTED_NAMESPACE = "kube-system"
GLOB_CHARACTERS = "*?"


def is_glob(pattern: str) -> bool:
    return any(character in pattern for character in GLOB_CHARACTERS)


def _glob_regex(pattern: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)


@dataclass(frozen=True)
class NamespacePatterns:
    patterns: tuple[str, ...]
    exact: frozenset[str] = field(init=False)
    globs: tuple[str, ...] = field(init=False)
    _glob_match: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        globs = tuple(p for p in self.patterns if is_glob(p))
        combined = "|".join(_glob_regex(glob) for glob in globs)
        object.__setattr__(self, "exact", frozenset(p for p in self.patterns if not is_glob(p)))
        object.__setattr__(self, "globs", globs)
        object.__setattr__(self, "_glob_match", re.compile(combined) if globs else None)

    def matches(self, namespace: str) -> bool:
        if namespace in self.exact:
            return True
        if self._glob_match is None or namespace == PROTECTED_NAMESPACE:
            return False
        return self._glob_match.fullmatch(namespace) is not None

    def literal_prefixes(self) -> tuple[tuple[str, bool], ...]:
        """What every matched name starts with: per pattern, its text up to the first
        wildcard, and whether more may follow (False for an exact name)."""
        return tuple((name, False) for name in sorted(self.exact)) + tuple(
            (_literal_prefix(glob), True) for glob in self.globs
        )

    def overlaps(self, other: NamespacePatterns) -> bool:
        """Whether some namespace matches both."""
        if self.exact & other.exact:
            return True
        if any(other.matches(name) for name in self.exact):
            return True
        if any(self.matches(name) for name in other.exact):
            return True
        return any(globs_intersect(a, b) for a in self.globs for b in other.globs)

    def within(self, other: NamespacePatterns) -> bool:
        """Whether every namespace these patterns match is matched by `other` (a safe
        approximation for globs: equal, or `other` holds a plain prefix glob that covers it)."""
        return all(other.matches(name) for name in self.exact) and all(
            glob in other.globs or any(_prefix_covers(wider, glob) for wider in other.globs)
            for glob in self.globs
        )


def _literal_prefix(glob: str) -> str:
    cut = min(glob.index(c) for c in GLOB_CHARACTERS if c in glob)
    return glob[:cut]


def _prefix_covers(wider: str, glob: str) -> bool:
    """`ml-*` covers `ml-team-*` and `ml-?`: a trailing-star glob with no other wildcard
    covers every glob that starts with its literal prefix."""
    prefix = wider[:-1]
    return wider.endswith("*") and not is_glob(prefix) and glob.startswith(prefix)


def globs_intersect(a: str, b: str) -> bool:
    """Whether some name matches both globs: a search over pairs of positions, one in each."""
    start = (0, 0)
    seen = {start}
    pending = [start]
    while pending:
        i, j = pending.pop()
        if i == len(a) and j == len(b):
            return True
        moves = []
        if i < len(a) and a[i] == "*":
            moves.append((i + 1, j))  # the star matches nothing more
        if j < len(b) and b[j] == "*":
            moves.append((i, j + 1))
        if i < len(a) and j < len(b) and _can_share_character(a[i], b[j]):
            moves.append((i if a[i] == "*" else i + 1, j if b[j] == "*" else j + 1))
        for move in moves:
            if move not in seen:
                seen.add(move)
                pending.append(move)
    return False


def _can_share_character(x: str, y: str) -> bool:
    return x in GLOB_CHARACTERS or y in GLOB_CHARACTERS or x == y
