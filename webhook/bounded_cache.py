"""Memos shared by a worker's threads, which forget their oldest entries beyond a size.

`BoundedMemo` keeps values by a key of the caller's. `BoundedCache` keeps values derived from
an object for as long as that very object is in use: an entry is keyed by the identity of the
object it was derived from (its `owner`: a policy, an outcome) and by a key of the caller's,
and the owner itself is kept in the entry, so that an id reused after the owner is gone never
finds the old value. Plain dict operations are atomic under the GIL, so a race between threads
at worst computes a value twice or forgets one early.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        while len(self._entries) >= self.max_entries:
            try:
                del self._entries[next(iter(self._entries))]
            except (KeyError, StopIteration, RuntimeError):
                # Another thread removed it, or changed the dict while this one looked.
                break
        self._entries[key] = value


class BoundedCache(Generic[K, V]):
    def __init__(self, max_entries: int) -> None:
        self._memo: BoundedMemo[tuple[int, K], tuple[object, V]] = BoundedMemo(max_entries)

    def __len__(self) -> int:
        return len(self._memo)

    def get(self, owner: object, key: K) -> V | None:
        entry = self._memo.get((id(owner), key))
        return entry[1] if entry is not None and entry[0] is owner else None

    def put(self, owner: object, key: K, value: V) -> None:
        self._memo.put((id(owner), key), (owner, value))
