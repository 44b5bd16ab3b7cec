"""Paths to fields inside a document, and how messages spell them."""

from __future__ import annotations

FieldPath = tuple[str | int, ...]


def format_field(path: FieldPath) -> str:
    """`("spec", "containers", 0, "name")` as `spec.containers[0].name`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(document)"
