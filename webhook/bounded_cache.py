"""A dict that forgets its oldest entries beyond a size, for memos shared by a worker's
threads: plain dict operations are atomic under the GIL, so a race at worst computes a value
twice or forgets one early."""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
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
