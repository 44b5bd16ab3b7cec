"""Changes made to a copy-on-write view of an object, recorded as an RFC 6902 patch.

The engine never deep-copies the object: the first write below a node copies that node and
its ancestors (shallowly), the original stays untouched, and each write is recorded as it is
made. Pointers are escaped by `jsonpointer`, the library `jsonpatch` uses.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property, lru_cache
from typing import Any

from jsonpointer import JsonPointer

Part = str | int
Operation = dict[str, Any]


class JsonPatch(tuple[Operation, ...]):
    """The operations of one patch, encoded once however many answers carry it (an outcome
    may be reused for many pods)."""

    @classmethod
    def of(cls, operations: Iterable[Mapping[str, Any]]) -> JsonPatch:
        if isinstance(operations, JsonPatch):
            return operations
        return cls(dict(operation) for operation in operations)

    @cached_property
    def base64(self) -> str:
        """The patch as an AdmissionReview response carries it: base64 of the JSON text."""
        text = json.dumps(self, separators=(",", ":")).encode()
        return base64.b64encode(text).decode("ascii")


class PatchRecorder:
    def __init__(self, original: dict[str, Any]) -> None:
        self.original = original
        self.document: dict[str, Any] = original
        self.operations: list[Operation] = []
        # Nodes this recorder copied and may change in place, by identity.
        self._owned: set[int] = set()

    @property
    def changed(self) -> bool:
        return bool(self.operations)

    def current(self, path: Sequence[Part]) -> Any:
        """The value at `path` in the object as patched so far; None where there is none."""
        node: Any = self.document
        for part in path:
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                return None
        return node

    def set(self, path: Sequence[Part], value: Any) -> None:
        """Add or replace the member at `path`; nothing is recorded if it already holds `value`."""
        parent = self._writable(path[:-1])
        key = path[-1]
        if isinstance(parent, dict):
            if key in parent:
                if parent[key] == value:
                    return
                op = "replace"
            else:
                op = "add"
        else:
            op = "replace"
        parent[key] = value
        self._record(op, path, value)

    def append(self, list_path: Sequence[Part], value: Any) -> None:
        """Append to the list at `list_path`, creating the list if it is absent."""
        parent = self._writable(list_path[:-1])
        key = list_path[-1]
        if key not in parent or parent[key] is None:
            parent[key] = [value]
            self._record("add", list_path, [value])
            return
        target = self._writable(list_path)
        target.append(value)
        self._record("add", (*list_path, "-"), value)

    def put(self, path: Sequence[Part], value: Any) -> None:
        """Set the member at `path`, creating the mappings above it that are absent."""
        node: Any = self.document
        for depth, part in enumerate(path[:-1]):
            child = node.get(part) if isinstance(node, dict) else node[part]
            if child is None:
                nested: Any = value
                for key in reversed(path[depth + 1 :]):
                    nested = {key: nested}
                self.set(path[: depth + 1], nested)
                return
            node = child
        self.set(path, value)

    def remove(self, path: Sequence[Part]) -> None:
        parent = self._writable(path[:-1])
        del parent[path[-1]]
        self._record("remove", path, None)

    def _writable(self, path: Sequence[Part]) -> Any:
        if id(self.document) not in self._owned:
            self.document = copy.copy(self.document)
            self._owned.add(id(self.document))
        node: Any = self.document
        for part in path:
            child = node[part]
            if id(child) not in self._owned:
                child = copy.copy(child)
                node[part] = child
                self._owned.add(id(child))
            node = child
        return node

    def _record(self, op: str, path: Sequence[Part], value: Any) -> None:
        pointer = json_pointer(tuple(str(part) for part in path))
        if op == "remove":
            self.operations.append({"op": op, "path": pointer})
        else:
            # A container value is copied so that later writes below it cannot change the op.
            recorded = value if isinstance(value, str) else copy.deepcopy(value)
            self.operations.append({"op": op, "path": pointer, "value": recorded})


@lru_cache(maxsize=4096)
def json_pointer(parts: tuple[str, ...]) -> str:
    """The escaped pointer (`nvidia.com~1gpu`). The same few paths recur on every request."""
    return JsonPointer.from_parts(parts).path
