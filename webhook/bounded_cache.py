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
    """With `max_bytes`, each entry also weighs what its `put` says (an estimate of the bytes it
    holds), and the entries together weigh at most that: where the keys are made from what
    clients send, a count alone does not bound memory. An entry heavier than an eighth of the
    budget is not kept at all, so one large input cannot push out everything else."""

    def __init__(self, max_entries: int, max_bytes: int | None = None) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: dict[K, V] = {}
        self._weights: dict[K, int] = {}
        self._weight = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        """What the entries weigh together, as their puts said."""
        return self._weight

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V, weight: int = 0) -> None:
        budget = self.max_bytes
        if budget is not None and weight > budget // 8:
            return
        self._drop(key)
        while len(self._entries) >= self.max_entries or (
            budget is not None and self._weight + weight > budget and self._entries
        ):
            try:
                self._drop(next(iter(self._entries)))
            except (StopIteration, RuntimeError):
                # Another thread changed the dict while this one looked.
                break
        self._entries[key] = value
        if weight:
            self._weights[key] = weight
            self._weight += weight

    def _drop(self, key: K) -> None:
        if self._entries.pop(key, None) is not None or key in self._weights:
            self._weight -= self._weights.pop(key, 0)


class BoundedCache(Generic[K, V]):
    def __init__(self, max_entries: int, max_bytes: int | None = None) -> None:
        self._memo: BoundedMemo[tuple[int, K], tuple[object, V]] = BoundedMemo(
            max_entries, max_bytes
        )

    def __len__(self) -> int:
        return len(self._memo)

    @property
    def weight(self) -> int:
        return self._memo.weight

    def get(self, owner: object, key: K) -> V | None:
        entry = self._memo.get((id(owner), key))
        return entry[1] if entry is not None and entry[0] is owner else None

    def put(self, owner: object, key: K, value: V, weight: int = 0) -> None:
        self._memo.put((id(owner), key), (owner, value), weight)
