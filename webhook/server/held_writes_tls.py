"""TLS connections that send a response in one piece.

gunicorn writes a response's headers and then its body, each with its own `sendall`: two TLS
records, two system calls, and a client woken twice for an answer of a few hundred bytes. While
the worker serves a request, this socket holds what is written and sends it all at once when
the request is done, or as soon as HELD_BYTES_LIMIT bytes wait, so a long response still
streams out with bounded memory.

Only `sendall` is held, and only between `hold_writes` and `send_held`: a `send` (gunicorn's
"100 Continue", which the client waits for before it sends the body) goes out at once, after
anything held, and so does everything written when nothing is held. Closing or shutting the
connection down sends what is held first.
"""

from __future__ import annotations

import contextlib
import ssl
from typing import Any

HELD_BYTES_LIMIT = 64 * 1024


class WriteHoldingSSLSocket(ssl.SSLSocket):
    # None: not holding. A class attribute, so a socket made before any hold needs no __init__.
    _held: list[bytes] | None = None
    _held_bytes = 0

    def hold_writes(self) -> None:
        """Hold what `sendall` is given until `send_held`."""
        if self._held is None:
            self._held, self._held_bytes = [], 0

    def send_held(self) -> None:
        """Send what is held, in one record, and stop holding."""
        held, self._held = self._held, None
        if held:
            super().sendall(b"".join(held))

    def sendall(self, data: Any, flags: int = 0) -> None:
        if self._held is None or flags:
            super().sendall(data, flags)
            return
        self._held.append(bytes(data))
        self._held_bytes += len(self._held[-1])
        if self._held_bytes >= HELD_BYTES_LIMIT:
            chunk = b"".join(self._held)
            self._held, self._held_bytes = [], 0
            super().sendall(chunk)

    def send(self, data: Any, flags: int = 0) -> int:
        if self._held:
            self._send_held_and_go_on_holding()
        return super().send(data, flags)

    def shutdown(self, how: int) -> None:
        self._send_held_if_connected()
        super().shutdown(how)

    def close(self) -> None:
        self._send_held_if_connected()
        super().close()

    def _send_held_and_go_on_holding(self) -> None:
        self.send_held()
        self.hold_writes()

    def _send_held_if_connected(self) -> None:
        # Closing must close even when the peer has gone and the last bytes cannot be sent.
        if self._held:
            with contextlib.suppress(OSError):
                self.send_held()
        self._held = None
