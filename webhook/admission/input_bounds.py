"""How large and how deep a review the webhook reads: limits on what a client controls.

The body's size is capped where it is read (settings, MAX_BODY_BYTES); this module bounds its
nesting. JSON decoding itself stops near the interpreter's recursion limit, but a value a few
hundred levels deep still decodes, and the encoders and copies that later walk the object would
fail on it with a RecursionError: an internal error reached from input. A review nested deeper
than `MAX_NESTING_DEPTH` is refused in-band instead. Kubernetes objects are a few levels deep
(a pod template's managedFields, the deepest part, about twenty).
"""

from __future__ import annotations

from typing import Any

MAX_NESTING_DEPTH = 100
_OPENERS = (b"{", b"[")


def nested_too_deeply(body: bytes, decoded: Any, limit: int = MAX_NESTING_DEPTH) -> bool:
    """Whether `decoded` (the JSON text `body`) nests objects and arrays more than `limit`
    deep. A body with no more opening brackets than that cannot, which the bytes say at the
    cost of two counts: most reviews are answered without the walk."""
    if sum(body.count(opener) for opener in _OPENERS) <= limit:
        return False
    return _depth_exceeds(decoded, limit)


def _depth_exceeds(value: Any, limit: int) -> bool:
    # Iterative: the walk must not itself recurse on what it measures.
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if type(node) is dict else node
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))
    return False
