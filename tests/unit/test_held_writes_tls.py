"""TLS connections that send a response in one piece, over real loopback sockets: what is
written while holding reaches the client only when sent, in one TLS write and in order; a
`send` goes out at once; a long response streams; closing sends what is held."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from webhook.certs.directory import ensure_dev_certificates
from webhook.server.held_writes_tls import HELD_BYTES_LIMIT, WriteHoldingSSLSocket

QUIET_SECONDS = 0.3
# The server's context, and a client's that trusts it.
Contexts = tuple[ssl.SSLContext, ssl.SSLContext]


class CountingSocket(WriteHoldingSSLSocket):
    """Counts the TLS writes that reach OpenSSL: SSLSocket.sendall writes through `send`."""

    tls_writes = 0

    def send(self, data: Any, flags: int = 0) -> int:
        type(self).tls_writes += 1
        return super().send(data, flags)


@pytest.fixture(scope="module")
def contexts(tmp_path_factory: pytest.TempPathFactory) -> Contexts:
    paths, _ = ensure_dev_certificates(tmp_path_factory.mktemp("certs"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(paths.cert, paths.key)
    server.sslsocket_class = CountingSocket
    client = ssl.create_default_context(cafile=str(paths.ca_cert))
    return server, client


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    CountingSocket.tls_writes = 0
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock


class Steps(threading.Semaphore):
    """The client lets the server take one step per release; none is lost if it comes early.
    `held` is set once the server has written what it holds, so that the client's quiet read
    tests the hold rather than a server not yet there."""

    def __init__(self) -> None:
        super().__init__(0)
        self.held = threading.Event()


class Connection:
    """A client's TLS connection, and the server's side of it served in a thread."""

    def __init__(
        self,
        listener: socket.socket,
        contexts: Contexts,
        serve: Callable[[WriteHoldingSSLSocket, Steps], None],
    ) -> None:
        server_context, client_context = contexts
        self.go_on = Steps()
        self.error: BaseException | None = None

        def run() -> None:
            connection, _ = listener.accept()
            try:
                with server_context.wrap_socket(connection, server_side=True) as tls:
                    assert isinstance(tls, WriteHoldingSSLSocket)
                    serve(tls, self.go_on)
            except BaseException as error:
                self.error = error

        self.thread = threading.Thread(target=run)
        self.thread.start()
        raw = socket.create_connection(listener.getsockname(), timeout=5)
        self.tls = client_context.wrap_socket(raw, server_hostname="localhost")

    def read(self, size: int, timeout: float = 5) -> bytes:
        """Up to `size` bytes, or what came before `timeout` passed in silence."""
        self.tls.settimeout(timeout)
        data = b""
        try:
            while len(data) < size:
                chunk = self.tls.recv(size - len(data))
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            pass
        return data

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.finish()

    def finish(self) -> None:
        self.go_on.release(10)
        self.thread.join(timeout=10)
        self.tls.close()
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


def send_held_when_released(tls: WriteHoldingSSLSocket, go_on: Steps) -> None:
    """Send what is held once the client lets the server go on, then wait to be let go."""
    go_on.held.set()
    go_on.acquire(timeout=10)
    tls.send_held()
    go_on.acquire(timeout=10)


def test_held_writes_reach_the_client_when_sent_in_one_tls_write(
    contexts: Contexts, listener: socket.socket
) -> None:
    def respond(tls: WriteHoldingSSLSocket, go_on: Steps) -> None:
        tls.hold_writes()
        tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
        tls.sendall(memoryview(b"body"))
        send_held_when_released(tls, go_on)

    with Connection(listener, contexts, respond) as connection:
        assert connection.go_on.held.wait(5)
        assert connection.read(1, timeout=QUIET_SECONDS) == b""
        assert CountingSocket.tls_writes == 0
        connection.go_on.release()
        expected = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody"
        assert connection.read(len(expected)) == expected
        assert CountingSocket.tls_writes == 1


def test_without_a_hold_every_write_goes_out_at_once(
    contexts: Contexts, listener: socket.socket
) -> None:
    def respond(tls: WriteHoldingSSLSocket, go_on: Steps) -> None:
        tls.sendall(b"first")
        tls.hold_writes()
        tls.send_held()  # nothing held: nothing sent, and holding ends
        tls.sendall(b"second")
        go_on.acquire(timeout=10)

    with Connection(listener, contexts, respond) as connection:
        assert connection.read(len(b"firstsecond")) == b"firstsecond"
        assert CountingSocket.tls_writes == 2


def test_a_send_while_holding_goes_out_at_once_after_what_is_held(
    contexts: Contexts, listener: socket.socket
) -> None:
    # gunicorn answers "Expect: 100-continue" with `send`, and the client waits for it.
    def respond(tls: WriteHoldingSSLSocket, go_on: Steps) -> None:
        tls.hold_writes()
        tls.sendall(b"held ")
        tls.send(b"100 Continue ")
        tls.sendall(b"held again")
        send_held_when_released(tls, go_on)

    with Connection(listener, contexts, respond) as connection:
        assert connection.read(len(b"held 100 Continue ")) == b"held 100 Continue "
        assert connection.go_on.held.wait(5)
        assert connection.read(1, timeout=QUIET_SECONDS) == b""
        writes_before_release = CountingSocket.tls_writes
        connection.go_on.release()
        assert connection.read(len(b"held again")) == b"held again"
        # "held again" left in a write of its own, only once released.
        assert CountingSocket.tls_writes == writes_before_release + 1


def test_a_long_response_streams_out_while_held(
    contexts: Contexts, listener: socket.socket
) -> None:
    piece = b"x" * 4096
    pieces = HELD_BYTES_LIMIT // len(piece) + 2

    def respond(tls: WriteHoldingSSLSocket, go_on: Steps) -> None:
        tls.hold_writes()
        for _ in range(pieces):
            tls.sendall(piece)
        send_held_when_released(tls, go_on)

    with Connection(listener, contexts, respond) as connection:
        streamed = connection.read(HELD_BYTES_LIMIT)
        assert streamed == b"x" * HELD_BYTES_LIMIT
        connection.go_on.release()
        rest = connection.read(pieces * len(piece) - HELD_BYTES_LIMIT)
        assert len(streamed + rest) == pieces * len(piece)


def test_closing_sends_what_is_held(contexts: Contexts, listener: socket.socket) -> None:
    def respond(tls: WriteHoldingSSLSocket, go_on: Steps) -> None:
        tls.hold_writes()
        tls.sendall(b"last words")
        tls.close()

    with Connection(listener, contexts, respond) as connection:
        assert connection.read(len(b"last words") + 1) == b"last words"


def test_closing_after_the_client_has_gone_still_closes(
    contexts: Contexts, listener: socket.socket
) -> None:
    closed = threading.Event()

    def respond(tls: WriteHoldingSSLSocket, go_on: Steps) -> None:
        go_on.acquire(timeout=10)
        tls.hold_writes()
        tls.sendall(b"x" * 1024)
        tls.close()
        closed.set()

    connection = Connection(listener, contexts, respond)
    # An abortive close: the server's write meets a reset connection.
    connection.tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.tls.close()
    connection.finish()
    assert closed.is_set()
