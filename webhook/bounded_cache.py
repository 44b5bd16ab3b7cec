"""Values derived from an object, kept for as long as that very object is in use, for memos
shared by a worker's threads.

An entry is keyed by the identity of the object it was derived from (its `owner`: a policy,
an outcome) and by a key of the caller's; the owner itself is kept in the entry, so that an id
reused after the owner is gone never finds the old value. The oldest entries are forgotten
beyond a size. Plain dict operations are atomic under the GIL, so a race between threads at
worst computes a value twice or forgets one early.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[int, K], tuple[object, V]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, owner: object, key: K) -> V | None:
        entry = self._entries.get((id(owner), key))
        return entry[1] if entry is not None and entry[0] is owner else None

    def put(self, owner: object, key: K, value: V) -> None:
        while len(self._entries) >= self.max_entries:
            try:
                del self._entries[next(iter(self._entries))]
            except (KeyError, StopIteration, RuntimeError):
                # Another thread removed it, or changed the dict while this one looked.
                break
        self._entries[(id(owner), key)] = (owner, value)
