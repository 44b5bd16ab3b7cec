"""Reading an HTTP body from the Kubernetes API with a ceiling on what is held.

The client's `response.data` reads whatever arrives. The API is trusted, but a proxy in front
of it or a bug is not a reason to hold an unbounded answer: every network input is bounded.
"""

from __future__ import annotations

from typing import Any

CHUNK_BYTES = 1024 * 1024


def read_at_most(response: Any, limit: int) -> bytes | None:
    """The body of `response` (urllib3, not preloaded), or None once it passes `limit` bytes."""
    chunks: list[bytes] = []
    held = 0
    while True:
        chunk = response.read(CHUNK_BYTES)
        if not chunk:
            return b"".join(chunks)
        held += len(chunk)
        if held > limit:
            return None
        chunks.append(chunk)
