"""The plain-HTTP metrics port: a deadline per request, a bounded number of connections, and a
scrape being answered never cut off by a burst of new connections."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.raw_sockets import read_until_closed
from webhook.metrics_http import MetricsServer

HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.fixture
def rendering() -> Iterator[tuple[MetricsServer, threading.Event]]:
    release = threading.Event()

    def render() -> bytes:
        release.wait(5)  # a scrape held in its answer until the test lets it go
        return b"counted 1\n"

    server = MetricsServer(
        render, "127.0.0.1", 0, status=lambda: b"{}", request_seconds=1.5, max_connections=3
    )
    server.start("test-metrics")
    yield server, release
    release.set()
    server.stop()


def connect(server: MetricsServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def test_a_scrape_being_answered_outlives_a_burst_of_silent_connections(
    rendering: tuple[MetricsServer, threading.Event],
) -> None:
    server, release = rendering
    scrape = connect(server)
    scrape.sendall(HEAD)
    time.sleep(0.2)  # its request has arrived; its answer waits on the render
    silent = [connect(server) for _ in range(6)]
    time.sleep(0.2)
    assert server.open_connections <= 3
    release.set()
    answer = read_until_closed(scrape)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"counted 1\n")
    for client in silent:
        client.close()


def test_a_client_that_drips_its_head_is_let_go_at_its_deadline(
    rendering: tuple[MetricsServer, threading.Event],
) -> None:
    server, _ = rendering
    dripping = connect(server)
    started = time.monotonic()
    for byte in HEAD[:10]:
        dripping.send(bytes([byte]))
        time.sleep(0.1)
    assert read_until_closed(dripping) == b""
    assert time.monotonic() - started < 3  # 1.5 s from its connection, however it drips


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /healthz HTTP/1.1\r\n\r\n", b"200"),
        (b"GET /status HTTP/1.1\r\n\r\n", b"200"),
        (b"POST /metrics HTTP/1.1\r\n\r\n", b"405"),
        (b"GET /nowhere HTTP/1.1\r\n\r\n", b"404"),
        (b"nonsense\r\n\r\n", b"400"),
        (b"GET /" + b"x" * 20000, b"431"),
    ],
)
def test_every_request_gets_one_answer_and_the_connection_closes(
    rendering: tuple[MetricsServer, threading.Event], request_bytes: bytes, status: bytes
) -> None:
    server, _ = rendering
    client = connect(server)
    client.sendall(request_bytes)
    answer = read_until_closed(client)
    assert answer.startswith(b"HTTP/1.1 " + status + b" ")
    assert b"Connection: close" in answer
