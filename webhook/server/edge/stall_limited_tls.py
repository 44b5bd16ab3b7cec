"""TLS connections that give up on a client gone silent.

gthread serves a request in a pool thread with the connection's socket blocking, so a client
that starts or completes the TLS handshake and then sends nothing, or stops reading its
answer, holds that thread for good, and a few such clients hold them all. Here blocking means
waiting at most `stall_seconds` for the next bytes to arrive or to leave; a client silent that
long is dropped as if it had closed the connection. The kube-apiserver sends a review at once,
reads its answer and gives up on a webhook after its timeoutSeconds (at most 30 s), so only a
client that is stuck, or means harm, ever meets the limit.
"""

from __future__ import annotations

import ssl
from typing import Any


class StallLimitedSSLSocket(ssl.SSLSocket):
    stall_seconds: float  # set by `stall_limited`

    def setblocking(self, flag: bool) -> None:
        self.settimeout(self.stall_seconds if flag else 0.0)

    def do_handshake(self, block: bool = False) -> None:
        if self.gettimeout() is None:
            self.settimeout(self.stall_seconds)
        try:
            super().do_handshake(block)
        except TimeoutError:
            raise self._stalled() from None

    def read(self, len: int = 1024, buffer: Any = None) -> Any:
        try:
            return super().read(len, buffer)
        except TimeoutError:
            raise self._stalled() from None

    def send(self, data: Any, flags: int = 0) -> int:
        # A client that stops reading its answer stalls a write (sendall writes through here).
        try:
            return super().send(data, flags)
        except TimeoutError:
            raise self._stalled() from None

    def _stalled(self) -> ssl.SSLEOFError:
        # gthread closes a connection that ends in SSL_ERROR_EOF quietly, as it does a client's
        # own close; any other error would be logged with a traceback, once per stalled client.
        return ssl.SSLEOFError(
            ssl.SSL_ERROR_EOF, f"the client was silent for {self.stall_seconds:g} s"
        )


def stall_limited(seconds: float, base: type[ssl.SSLSocket] = ssl.SSLSocket) -> type[ssl.SSLSocket]:
    """The SSLSocket class for an SSLContext's `sslsocket_class`, waiting at most `seconds`,
    and otherwise the `base` class given."""
    return type("ServingSSLSocket", (StallLimitedSSLSocket, base), {"stall_seconds": seconds})
