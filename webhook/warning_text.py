"""Admission warnings as kubectl prints them: one line each, cut rather than wrapped."""

from __future__ import annotations

MAX_WARNING_LENGTH = 119


def one_line_warning(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_WARNING_LENGTH else text[: MAX_WARNING_LENGTH - 3] + "..."
