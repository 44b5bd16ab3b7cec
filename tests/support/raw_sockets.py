"""Reading a raw connection's answer to its end, for tests that speak HTTP by hand."""

from __future__ import annotations

import socket


def read_until_closed(client: socket.socket) -> bytes:
    """Every byte the server sends until it closes; a reset after its answer ends it too (what
    came before is what counts)."""
    answer = b""
    try:
        while data := client.recv(65536):
            answer += data
    except OSError:
        pass
    return answer
