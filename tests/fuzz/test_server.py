"""The fuzz properties over HTTPS: generated bodies posted to the real gunicorn, started as
`make run` starts it (tests/support/server.py), with the shipped policies. Each gets the HTTP
status the route gives (200 for a review; 400, 413 or 415 otherwise, never a 5xx) and, for a
review, a well-formed answer whose patch applies, obeys the apiserver, and is stable when the
patched object is sent again; the server logs no fault and no traceback meanwhile.

A connection that was answered 413 or 415 is not used again by the generated test: the route
answers those without reading the body, and what the connection is worth afterwards has tests
of its own below."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given

from tests.fuzz.profiles import ci
from tests.fuzz.properties import Post, Reply, check_body, policy_set
from tests.fuzz.strategies import Case, Endpoint, cases
from tests.support.server import FRACTIONAL_POD_REVIEW, WebhookClient, WebhookServer
from webhook.server.settings import MAX_BODY_BYTES

FAMILIES = ("bytes", "json", "envelope", "request", "workload", "workload", "sibling")


@pytest.fixture(scope="module")
def server(shipped_server: WebhookServer) -> WebhookServer:
    return shipped_server


@pytest.fixture(scope="module")
def log_offset(server: WebhookServer) -> int:
    """Where the server's log stood before this module posted anything."""
    return len(server.log())


@pytest.fixture(scope="module")
def client(server: WebhookServer, log_offset: int) -> Iterator[WebhookClient]:
    client = server.client()
    yield client
    client.close()


def over_https(client: WebhookClient) -> Post:
    def post(body: bytes, endpoint: Endpoint, content_type: str = "application/json") -> Reply:
        headers = {"Content-Type": content_type} if content_type else {}
        reply = client.request("POST", f"/{endpoint}", body, headers)
        if reply.status in (413, 415):
            client.close()  # the body was left unread: see the tests at the end
        return Reply(reply.status, reply.body)

    return post


@ci(300)
@given(cases(families=FAMILIES, policy_sets=("shipped",), content_types=True))
def test_generated_bodies_over_https(client: WebhookClient, case: Case) -> None:
    post = over_https(client)
    if case.warmup is not None:
        post(case.warmup, case.endpoint)
    check_body(case.body, case.endpoint, post, policy_set("shipped"), case.content_type)


def test_a_body_at_the_size_limit_is_judged(client: WebhookClient) -> None:
    pod: dict[str, Any] = {"spec": {"containers": [{"name": "a"}]}}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "fuzz-size", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "operation": "CREATE", "object": pod},
    }  # fmt: skip
    base = len(json.dumps(review).encode()) + len(', "note": ""')
    pod["spec"]["note"] = "x" * (MAX_BODY_BYTES - base)
    body = json.dumps(review).encode()
    assert len(body) == MAX_BODY_BYTES
    assert check_body(body, "mutate", over_https(client), policy_set("shipped")) == "200 allowed"


# --- what a connection is worth after a body the route did not read ------------------------


class RawConnection:
    """One TLS connection, written and read by hand: a request may be sent head first, and a
    reply read while the client has not sent all it declared."""

    def __init__(self, server: WebhookServer) -> None:
        context = ssl.create_default_context(cafile=str(server.certificates.ca_cert))
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=15)
        self.tls = context.wrap_socket(raw, server_hostname="localhost")
        self.buffer = b""

    def send(self, content_type: str, length: int, body: bytes = b"") -> None:
        head = (
            f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\n\r\n"
        )
        self.tls.sendall(head.encode() + body)

    def reply(self) -> tuple[int, dict[str, str], bytes] | None:
        """The next reply: status, headers (lower-case names) and body; None if the server
        closed the connection first."""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.tls.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:])
        }
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            chunk = self.tls.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), headers, body

    def close(self) -> None:
        self.tls.close()


def kept_alive_and_answers(connection: RawConnection, headers: dict[str, str]) -> str | None:
    """Why the connection, kept alive by `headers`, fails the next review; None if it does not.
    A server that will not read the rest of a body must say `Connection: close` (RFC 9112,
    9.6); one that keeps the connection must answer the next request on it."""
    if headers.get("connection", "").lower() == "close":
        return None
    review = FRACTIONAL_POD_REVIEW.read_bytes()
    try:
        connection.send("application/json", len(review), review)
        reply = connection.reply()
    except OSError as error:
        return f"the next review on the kept-alive connection failed: {error!r}"
    if reply is None:
        return "the server closed the kept-alive connection without answering the next review"
    if reply[0] != 200:
        return f"the next review on the kept-alive connection got HTTP {reply[0]}: {reply[2]!r}"
    return None


def test_a_413_closes_the_connection_or_answers_the_next_review(server: WebhookServer) -> None:
    # The client declares a body over the limit and waits for the answer before sending it, as
    # an `Expect: 100-continue` client would; the route answers 413 without reading it.
    connection = RawConnection(server)
    try:
        connection.send("application/json", MAX_BODY_BYTES + 1)
        reply = connection.reply()
        assert reply is not None and reply[0] == 413, reply
        problem = kept_alive_and_answers(connection, reply[1])
    finally:
        connection.close()
    assert problem is None, f"after a 413 that said {reply[1].get('connection')!r}: {problem}"


def test_a_415_closes_the_connection_or_answers_the_next_review(server: WebhookServer) -> None:
    # A large body of the wrong type, which the route answers 415 without reading; a client that
    # goes on using the connection a moment later, with another large body. The server drops
    # such a connection now and then: twenty tries.
    problems = []
    for _ in range(20):
        connection = RawConnection(server)
        try:
            body = b"x" * 450_000
            connection.send("text/plain", len(body), body)
            reply = connection.reply()
            assert reply is not None and reply[0] == 415, reply
            if reply[1].get("connection", "").lower() == "close":
                continue
            time.sleep(0.004)
            connection.send("text/plain", len(body), body)
            again = connection.reply()
        except OSError as error:
            again, problems = None, [*problems, repr(error)]
        finally:
            connection.close()
        if again is None and not problems:
            problems.append("closed without an answer")
        if problems:
            break
    assert not problems, (
        "after a 415 that said 'keep-alive', the next request on the connection was not "
        f"answered: {problems[0]}"
    )


def test_the_server_logged_no_fault_and_no_traceback(
    server: WebhookServer, client: WebhookClient, log_offset: int
) -> None:
    client.request("GET", "/healthz")  # every line is written before its answer is sent
    written = server.log()[log_offset:]
    assert "Traceback" not in written
    faults = []
    for line in written.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("verdict") == "errored":
            faults.append(line)
    assert not faults, "\n".join(faults[:5])
