"""`python -m tests.soak.adversarial [--seconds N] [--markdown PATH] [--only NAME,...]`: the
real server, attacked one way at a time, while a probe opens a new TLS connection every 0.25 s
and sends one review.

tests/test_hostile_clients.py checks, quickly and in `make test`, the few hostile clients the
webhook was built against. This runs the wider matrix someone reviewing a webhook that every
GPU pod waits on would try: a flood of stalled handshakes, idle connections, slowloris, each
body framing dripped, oversized bodies, pipelining, request-smuggling heads, and drips on the
plain metrics port. Each runs for a bounded time against a fresh server (its defaults: two
workers of four threads, the evented front), to show whether it slows or fails the reviews of
others, what the attacker is answered, and how long its connections are held.

It prints a line per attack and a Markdown table (also written to `--markdown`), and exits 1
when a probe failed, the log holds a traceback or a 5xx other than the front's 501, a
smuggled request was answered, or an attacker was held longer than the server's deadlines.
Every loop is bounded in count and time; all traffic goes to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import resource
import selectors
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

from tests.support.kept_alive import KeptAlive, review_body
from tests.support.server import REPO_ROOT, WebhookServer, free_port

SECONDS = 15.0  # each attack's window, the probe's with it
PROBE_EVERY = 0.25
PROBE_TIMEOUT = 5.0
CONNECT_TIMEOUT = 10.0
DRIP_SECONDS = 2.0
# The server's deadlines (FrontLimits, metrics_http): a new connection's first bytes within 1 s,
# a request whole within 10 s of its first bytes. A hold past either by this much is a finding.
FIRST_BYTES_SECONDS = 1.0
REQUEST_SECONDS = 10.0
HOLD_SLACK_SECONDS = 2.0

FLOOD = 200
IDLE = 500
SLOWLORIS = 100
LENGTH_STALLS = 50
CHUNKED_DRIPS = 24
EXPECT_DRIPS = 24
OVERSIZED_LENGTH = 20
OVERSIZED_CHUNKED = 5
OVERSIZED_BYTES = 9 * 2**20  # the body cap is 8 MiB
OVERSIZED_LENGTH_PAUSE = 1.0  # between one declared-length client's attempts
PIPELINED = 50
PIPELINE_PAUSE = 0.5
SMUGGLE_PAUSE = 0.5
METRICS_DRIPS = 200
SCRAPE_EVERY = 0.25
START_RETRY_PAUSE = 5.0

# Bounds on every loop's count, beside its window.
MAX_OPENED = 100_000
MAX_ATTEMPTS = 10_000
SEND_BYTES = 64 * 1024
RECEIVE_BYTES = 64 * 1024
OPENS_BETWEEN_READS = 20

TLS_RECORD_HEADER = b"\x16\x03\x01\x02\x00"  # a handshake record of 512 bytes, never sent
SLOW_HEAD = b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 4096
METRICS_SLOW_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 4096
REVIEW_HEAD = b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
SMUGGLED = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
CHUNKED_BODY = b"5\r\nhello\r\n0\r\n\r\n"
SMUGGLING_HEADS: list[tuple[str, bytes, bytes]] = [
    ("CL + TE", b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", CHUNKED_BODY),
    ("TE + CL", b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", CHUNKED_BODY),
    ("CL twice", b"Content-Length: 15\r\nContent-Length: 5\r\n", CHUNKED_BODY),
    ("TE xchunked", b"Transfer-Encoding: xchunked\r\n", CHUNKED_BODY),
    ("'TE :'", b"Transfer-Encoding : chunked\r\n", CHUNKED_BODY),
    ("TE chunked, identity", b"Transfer-Encoding: chunked, identity\r\n", CHUNKED_BODY),
    ("CL +5", b"Content-Length: +5\r\n", b"hello"),
]
_NOT_YET = (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError)


@dataclass
class Counts:
    """How many clients each attack uses (a flag each)."""

    flood: int = FLOOD
    idle: int = IDLE
    slowloris: int = SLOWLORIS
    length_stalls: int = LENGTH_STALLS
    chunked_drips: int = CHUNKED_DRIPS
    expect_drips: int = EXPECT_DRIPS
    oversized_length: int = OVERSIZED_LENGTH
    oversized_chunked: int = OVERSIZED_CHUNKED
    pipelined: int = PIPELINED
    metrics_drips: int = METRICS_DRIPS


# --- numbers -----------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    """Nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def latency_ms(values: list[float]) -> str:
    """p50 / p99 / max of seconds, in ms."""
    parts = (percentile(values, 0.5), percentile(values, 0.99), max(values, default=0.0))
    return " / ".join(f"{value * 1000:.1f}" for value in parts)


def spread_s(values: list[float]) -> str:
    if not values:
        return "none"
    return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s"


def tally(counter: Counter[str]) -> str:
    return ", ".join(f"{what} x{count:,}" for what, count in counter.most_common()) or "none"


# --- answers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    line: str
    body: bytes


def split_answers(data: bytes) -> list[Answer]:
    """Each whole HTTP/1 answer in `data`, in order, interim 1xx ones included; an answer
    without a Content-Length takes the rest."""
    answers: list[Answer] = []
    at = 0
    while (end := data.find(b"\r\n\r\n", at)) >= 0:
        lines = data[at:end].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            break
        status = int(parts[1])
        line = lines[0].decode("latin-1")
        at = end + 4
        if 100 <= status < 200:
            answers.append(Answer(status, line, b""))
            continue
        length = _content_length(lines[1:])
        if length is None:
            answers.append(Answer(status, line, data[at:]))
            break
        answers.append(Answer(status, line, data[at : at + length]))
        at += length
    return answers


def _content_length(lines: list[bytes]) -> int | None:
    for line in lines:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return int(value.strip())
    return None


def described(data: bytes) -> str:
    """What an attacker was answered, as its status codes: `408`, `100→408`, `no answer`."""
    if not data:
        return "no answer"
    answers = split_answers(data)
    return "→".join(str(answer.status) for answer in answers) if answers else "unparsed bytes"


# --- sockets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arena:
    """One server under one attack, and when the attack's window ends."""

    server: WebhookServer
    metrics_port: int
    counts: Counts
    deadline: float
    context: ssl.SSLContext

    def tcp(self, port: int | None = None) -> socket.socket:
        address = ("127.0.0.1", self.server.port if port is None else port)
        return socket.create_connection(address, timeout=CONNECT_TIMEOUT)

    def tls(self) -> ssl.SSLSocket:
        return self.context.wrap_socket(self.tcp(), server_hostname="localhost")


def drain(sock: socket.socket, into: bytearray) -> str | None:
    """Read what has arrived without waiting. None: still open; else how it closed."""
    while True:
        try:
            data = sock.recv(RECEIVE_BYTES)
        except _NOT_YET:
            return None
        except OSError as error:
            return type(error).__name__
        if not data:
            return "closed"
        into += data


def try_send(sock: socket.socket, data: bytes | memoryview) -> int | str:
    """Send without waiting: the bytes sent (0: not now), or how the connection failed."""
    try:
        return sock.send(data)
    except _NOT_YET:
        return 0
    except OSError as error:
        return type(error).__name__


@dataclass(frozen=True)
class Heard:
    """What one connection pushing `payload` heard, timed from its first byte sent."""

    received: bytes
    sent: int
    answered_after: float | None
    closed_after: float | None  # None: still open at the limit
    how_closed: str | None


def push_and_listen(sock: socket.socket, payload: bytes, limit: float) -> Heard:
    """Send `payload` as fast as the server takes it while reading what it answers, until the
    server closes or `limit` seconds pass; a failed send stops sending, not reading."""
    sock.setblocking(False)
    view = memoryview(payload)
    received = bytearray()
    sent = 0
    started = time.monotonic()
    answered: float | None = None
    how_closed: str | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        writing = True
        while how_closed is None and (left := started + limit - time.monotonic()) > 0:
            for _key, mask in selector.select(min(left, 0.5)):
                if mask & selectors.EVENT_WRITE and writing:
                    result = try_send(sock, view[sent : sent + SEND_BYTES])
                    if isinstance(result, str):
                        writing = False
                    else:
                        sent += result
                        writing = sent < len(payload)
                    if not writing:
                        selector.modify(sock, selectors.EVENT_READ)
                if mask & selectors.EVENT_READ:
                    how_closed = drain(sock, received)
            if received and answered is None:
                answered = time.monotonic() - started
    closed = time.monotonic() - started if how_closed is not None else None
    return Heard(bytes(received), sent, answered, closed, how_closed)


def master_rss_kib(server: WebhookServer) -> int:
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# --- the probe ---------------------------------------------------------------------------------


class ProbeClient(KeptAlive):
    """KeptAlive with the probe's timeout on each step (KeptAlive's own is 30 s)."""

    def __init__(self, server: WebhookServer, timeout: float) -> None:
        context = ssl.create_default_context(cafile=str(server.certificates.ca_cert))
        self.https = http.client.HTTPSConnection(
            "localhost", server.port, context=context, timeout=timeout
        )
        self.https.connect()


@dataclass
class ProbeResult:
    waits: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"{latency_ms(self.waits)}, {len(self.failures)} failures"


def probe(server: WebhookServer, deadline: float) -> ProbeResult:
    """A new connection and one review every PROBE_EVERY seconds until `deadline`."""
    result = ProbeResult()
    due = time.monotonic()
    for _ in range(MAX_ATTEMPTS):
        if due >= deadline:
            break
        time.sleep(max(due - time.monotonic(), 0))
        started = time.perf_counter()
        try:
            client = ProbeClient(server, PROBE_TIMEOUT)
            try:
                client.review()
            finally:
                client.close()
        except Exception as error:
            result.failures.append(f"{type(error).__name__}: {error}")
            continue
        finally:
            due = max(due + PROBE_EVERY, time.monotonic())
        waited = time.perf_counter() - started
        if waited > PROBE_TIMEOUT:
            result.failures.append(f"answered after {waited:.1f} s")
        else:
            result.waits.append(waited)
    return result


# --- crowds of connections that stall ----------------------------------------------------------


@dataclass(eq=False)
class Attacker:
    sock: socket.socket
    opened: float
    drips: int = 0
    received: bytearray = field(default_factory=bytearray)
    closed: float | None = None

    @property
    def held(self) -> float | None:
        return None if self.closed is None else self.closed - self.opened


@dataclass(frozen=True)
class CrowdPlan:
    size: int
    connect: Callable[[], socket.socket]
    first: bytes  # sent at once, after the connection (and its handshake)
    drip: Callable[[int], bytes] | None = None  # the bytes of the n-th drip, from 1
    reopen: bool = False  # open another for each one closed, until the window ends


@dataclass
class CrowdResult:
    started: float
    reopens: bool = False
    ended: float | None = None  # when the window ended and what was open was closed
    attackers: list[Attacker] = field(default_factory=list)
    open_failures: Counter[str] = field(default_factory=Counter)

    @property
    def held(self) -> list[float]:
        return [held for a in self.attackers if (held := a.held) is not None]

    @property
    def still_open(self) -> int:
        return sum(a.closed is None for a in self.attackers)

    def summary(self) -> str:
        answers = Counter(described(bytes(a.received)) for a in self.attackers)
        text = (
            f"{len(self.attackers):,} connections: {tally(answers)}; "
            f"closed after {spread_s(self.held)}"
        )
        if self.still_open and self.reopens:
            text += f"; the last {self.still_open:,} (reopened) closed by us at the window's end"
        elif self.still_open:
            text += f"; {self.still_open:,} still open when the window ended"
        if self.open_failures:
            text += f"; failed to open: {tally(self.open_failures)}"
        return text


class Crowd:
    """Run on one thread: its sockets are read and written nowhere else."""

    def __init__(self, plan: CrowdPlan, deadline: float) -> None:
        self.plan = plan
        self.deadline = deadline
        self.selector = selectors.DefaultSelector()
        self.result = CrowdResult(time.monotonic(), plan.reopen)

    def run(self) -> CrowdResult:
        try:
            for index in range(self.plan.size):
                if time.monotonic() < self.deadline:
                    self._open()
                if index % OPENS_BETWEEN_READS == 0:
                    self._read_ready()  # so that a close while the crowd gathers is timed
            self._watch()
        finally:
            self.result.ended = time.monotonic()
            for attacker in self._live():
                attacker.sock.close()
            self.selector.close()
        return self.result

    def _live(self) -> list[Attacker]:
        return [key.data for key in self.selector.get_map().values()]

    def _open(self) -> None:
        if len(self.result.attackers) >= MAX_OPENED:
            return
        try:
            sock = self.plan.connect()
            sock.sendall(self.plan.first)
        except OSError as error:
            self.result.open_failures[type(error).__name__] += 1
            return
        sock.setblocking(False)
        attacker = Attacker(sock, time.monotonic())
        self.result.attackers.append(attacker)
        self.selector.register(sock, selectors.EVENT_READ, attacker)

    def _watch(self) -> None:
        next_drip = time.monotonic() + DRIP_SECONDS
        while (now := time.monotonic()) < self.deadline:
            until = min(next_drip, self.deadline) if self.plan.drip else self.deadline
            for key, _mask in self.selector.select(max(until - now, 0)):
                self._read(key.data)
            if self.plan.drip is not None and time.monotonic() >= next_drip:
                self._drip(self.plan.drip)
                next_drip += DRIP_SECONDS

    def _read_ready(self) -> None:
        for key, _mask in self.selector.select(0):
            self._read(key.data)

    def _read(self, attacker: Attacker) -> None:
        if drain(attacker.sock, attacker.received) is not None:
            self._closed(attacker)

    def _drip(self, drip: Callable[[int], bytes]) -> None:
        for attacker in self._live():
            attacker.drips += 1
            if isinstance(try_send(attacker.sock, drip(attacker.drips)), str):
                drain(attacker.sock, attacker.received)  # an answer before the reset counts
                self._closed(attacker)

    def _closed(self, attacker: Attacker) -> None:
        attacker.closed = time.monotonic()
        self.selector.unregister(attacker.sock)
        attacker.sock.close()
        if self.plan.reopen and time.monotonic() < self.deadline:
            self._open()


def byte_of(script: bytes) -> Callable[[int], bytes]:
    return lambda n: script[n % len(script) : n % len(script) + 1]


# --- the attacks -------------------------------------------------------------------------------


@dataclass
class Findings:
    got: str
    details: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)


def crowd_findings(result: CrowdResult, bound: float) -> Findings:
    """The crowd's summary; a fault for each connection held past `bound` (and some slack),
    counting those still open when the window ended for as long as they had been."""
    findings = Findings(result.summary())
    ended = result.ended or time.monotonic()
    holds = [ended - a.opened if a.held is None else a.held for a in result.attackers]
    late = [held for held in holds if held > bound + HOLD_SLACK_SECONDS]
    if late:
        findings.faults.append(
            f"{len(late)} connections held past {bound:g} s, the longest {max(late):.1f} s"
        )
    return findings


def handshake_flood(arena: Arena) -> Findings:
    plan = CrowdPlan(arena.counts.flood, arena.tcp, TLS_RECORD_HEADER, reopen=True)
    return crowd_findings(Crowd(plan, arena.deadline).run(), FIRST_BYTES_SECONDS)


def idle_connections(arena: Arena) -> Findings:
    plan = CrowdPlan(arena.counts.idle, arena.tcp, b"")
    return crowd_findings(Crowd(plan, arena.deadline).run(), FIRST_BYTES_SECONDS)


def slowloris(arena: Arena) -> Findings:
    plan = CrowdPlan(arena.counts.slowloris, arena.tls, SLOW_HEAD[:1], byte_of(SLOW_HEAD))
    return crowd_findings(Crowd(plan, arena.deadline).run(), REQUEST_SECONDS)


def length_stall(arena: Arena) -> Findings:
    head = REVIEW_HEAD + b"Content-Length: 100000\r\n\r\n"
    plan = CrowdPlan(arena.counts.length_stalls, arena.tls, head, lambda _n: b"{")
    return crowd_findings(Crowd(plan, arena.deadline).run(), REQUEST_SECONDS)


def chunked_drip(arena: Arena) -> Findings:
    head = REVIEW_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    plan = CrowdPlan(arena.counts.chunked_drips, arena.tls, head, lambda _n: b"1\r\n \r\n")
    return crowd_findings(Crowd(plan, arena.deadline).run(), REQUEST_SECONDS)


def expect_drip(arena: Arena) -> Findings:
    head = REVIEW_HEAD + b"Expect: 100-continue\r\nContent-Length: 100000\r\n\r\n"
    plan = CrowdPlan(arena.counts.expect_drips, arena.tls, head, lambda _n: b" ")
    return crowd_findings(Crowd(plan, arena.deadline).run(), REQUEST_SECONDS)


@dataclass
class Attempts:
    """What the repeated attempts of one kind of client were answered."""

    answers: Counter[str] = field(default_factory=Counter)
    answered_after: list[float] = field(default_factory=list)
    closed_after: list[float] = field(default_factory=list)
    sent_mib: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, heard: Heard) -> None:
        with self.lock:
            what = described(heard.received)
            if heard.how_closed not in (None, "closed"):
                what += f" ({heard.how_closed})"
            self.answers[what] += 1
            if heard.answered_after is not None:
                self.answered_after.append(heard.answered_after)
            if heard.closed_after is not None:
                self.closed_after.append(heard.closed_after)
            self.sent_mib.append(heard.sent / 2**20)

    def summary(self) -> str:
        return (
            f"{sum(self.answers.values()):,} attempts: {tally(self.answers)}; answered after "
            f"{spread_s(self.answered_after)}; the client got out {spread_mib(self.sent_mib)}"
        )


def spread_mib(values: list[float]) -> str:
    if not values:
        return "none"
    return f"median {statistics.median(values):.2f} MiB, max {max(values):.2f} MiB"


def oversized_payloads() -> tuple[bytes, bytes]:
    declared = REVIEW_HEAD + f"Content-Length: {OVERSIZED_BYTES}\r\n\r\n".encode()
    piece = f"{SEND_BYTES:x}\r\n".encode() + b"x" * SEND_BYTES + b"\r\n"
    chunks = piece * (OVERSIZED_BYTES // SEND_BYTES) + b"0\r\n\r\n"
    return (
        declared + b"x" * OVERSIZED_BYTES,
        REVIEW_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunks,
    )


def keep_attempting(arena: Arena, payload: bytes, pause: float, into: Attempts) -> None:
    for _ in range(MAX_ATTEMPTS):
        if time.monotonic() >= arena.deadline:
            return
        try:
            sock = arena.tls()
        except OSError as error:
            into.add(Heard(b"", 0, None, None, f"open failed: {type(error).__name__}"))
            time.sleep(max(pause, PROBE_EVERY))
            continue
        with sock:
            into.add(push_and_listen(sock, payload, CONNECT_TIMEOUT))
        time.sleep(pause)


def oversized_body(arena: Arena) -> Findings:
    declared, chunked = oversized_payloads()
    by_length, by_chunks = Attempts(), Attempts()
    counts = arena.counts
    with ThreadPoolExecutor(counts.oversized_length + counts.oversized_chunked) as pool:
        jobs = [
            pool.submit(keep_attempting, arena, declared, OVERSIZED_LENGTH_PAUSE, by_length)
            for _ in range(counts.oversized_length)
        ]
        jobs += [
            pool.submit(keep_attempting, arena, chunked, 0.0, by_chunks)
            for _ in range(counts.oversized_chunked)
        ]
        for job in jobs:
            job.result()
    findings = Findings(
        f"Content-Length 9 MiB: {by_length.summary()}. Chunked 9 MiB: {by_chunks.summary()}"
    )
    for name, attempts in (("declared", by_length), ("chunked", by_chunks)):
        others = {what for what in attempts.answers if not what.startswith("413")}
        if others:
            findings.faults.append(f"{name} oversized bodies answered other than 413: {others}")
    return findings


def pipelined_payload(uids: list[str]) -> bytes:
    requests = [
        REVIEW_HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
        for body in (review_body(uid) for uid in uids)
    ]
    closing = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    return b"".join(requests) + closing


def in_order(answers: list[Answer], uids: list[str]) -> bool:
    if len(answers) != len(uids) + 1 or any(a.status != 200 for a in answers):
        return False
    for answer, uid in zip(answers, uids, strict=False):
        if json.loads(answer.body)["response"]["uid"] != uid:
            return False
    return json.loads(answers[-1].body) == {"status": "ok"}


def pipelining(arena: Arena) -> Findings:
    whole: list[float] = []
    broken: Counter[str] = Counter()
    for _ in range(MAX_ATTEMPTS):
        if time.monotonic() >= arena.deadline:
            break
        uids = [str(uuid.uuid4()) for _ in range(arena.counts.pipelined)]
        try:
            with arena.tls() as sock:
                heard = push_and_listen(sock, pipelined_payload(uids), CONNECT_TIMEOUT)
        except OSError as error:
            broken[f"open failed: {type(error).__name__}"] += 1
            time.sleep(PIPELINE_PAUSE)
            continue
        answers = split_answers(heard.received)
        if heard.closed_after is not None and in_order(answers, uids):
            whole.append(heard.closed_after)
        else:
            broken[f"{len(answers)} answers, {described(heard.received)[:60]}"] += 1
        time.sleep(PIPELINE_PAUSE)
    n = arena.counts.pipelined
    findings = Findings(
        f"{len(whole) + sum(broken.values())} rounds of {n} reviews + GET /healthz in one write: "
        f"{len(whole)} with all {n + 1} answers in order, all in {spread_s(whole)}"
    )
    if broken:
        findings.got += f"; broken: {tally(broken)}"
        findings.faults.append(f"pipelined rounds broken: {tally(broken)}")
    return findings


@dataclass
class Smuggle:
    statuses: Counter[str] = field(default_factory=Counter)
    second_answers: int = 0
    closed_after: list[float] = field(default_factory=list)
    left_open: int = 0


def smuggle_once(arena: Arena, head: bytes, body: bytes, into: Smuggle) -> None:
    payload = b"POST /mutate HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n" + body + SMUGGLED
    try:
        with arena.tls() as sock:
            heard = push_and_listen(sock, payload, PROBE_TIMEOUT)
    except OSError as error:
        into.statuses[f"open failed: {type(error).__name__}"] += 1
        return
    answers = [a for a in split_answers(heard.received) if a.status >= 200]
    first = answers[0].line.partition(" ")[2] if answers else described(heard.received)
    into.statuses[first] += 1
    into.second_answers += len(answers) > 1
    if heard.closed_after is None:
        into.left_open += 1
    else:
        into.closed_after.append(heard.closed_after)


def smuggling(arena: Arena) -> Findings:
    cases = {label: Smuggle() for label, _head, _body in SMUGGLING_HEADS}
    for _ in range(MAX_ATTEMPTS):
        if time.monotonic() >= arena.deadline:
            break
        for label, head, body in SMUGGLING_HEADS:
            smuggle_once(arena, head, body, cases[label])
        time.sleep(SMUGGLE_PAUSE)
    rounds = sum(cases[SMUGGLING_HEADS[0][0]].statuses.values())
    got = [f"{label}: {tally(case.statuses)}" for label, case in cases.items()]
    findings = Findings(
        f"{rounds} rounds; " + "; ".join(got) + "; the smuggled GET answered "
        f"{sum(c.second_answers for c in cases.values())} times"
    )
    closes = [after for case in cases.values() for after in case.closed_after]
    findings.details.append(f"each closed after {spread_s(closes)}")
    for label, case in cases.items():
        if case.second_answers:
            findings.faults.append(f"{label}: the smuggled request was answered")
        if case.left_open:
            findings.faults.append(f"{label}: {case.left_open} left open past {PROBE_TIMEOUT:g} s")
    return findings


def scrape(port: int, deadline: float) -> ProbeResult:
    """GET /metrics on the plain port every SCRAPE_EVERY seconds until `deadline`."""
    result = ProbeResult()
    first = time.perf_counter()
    for _ in range(MAX_ATTEMPTS):
        if time.monotonic() >= deadline:
            break
        started = time.perf_counter()
        when = f" at {started - first:.2f} s"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=PROBE_TIMEOUT)
        try:
            connection.request("GET", "/metrics")
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                result.failures.append(f"HTTP {response.status}{when}")
            else:
                result.waits.append(time.perf_counter() - started)
        except (OSError, http.client.HTTPException) as error:
            result.failures.append(f"{type(error).__name__}: {error}{when}")
        finally:
            connection.close()
        time.sleep(max(SCRAPE_EVERY - (time.perf_counter() - started), 0))
    return result


def metrics_drips(arena: Arena) -> Findings:
    before = master_rss_kib(arena.server)
    plan = CrowdPlan(
        arena.counts.metrics_drips,
        lambda: arena.tcp(arena.metrics_port),
        METRICS_SLOW_HEAD[:1],
        byte_of(METRICS_SLOW_HEAD),
    )
    with ThreadPoolExecutor(1) as pool:
        scrapes = pool.submit(scrape, arena.metrics_port, arena.deadline)
        result = Crowd(plan, arena.deadline).run()
        scraped = scrapes.result()
    after = master_rss_kib(arena.server)
    closes = [a.closed for a in result.attackers if a.closed is not None]
    let_go = f"{max(closes) - result.started:.2f} s" if closes else "never"
    # The port keeps 64 connections (metrics_http): past that, a new one closes the oldest.
    early = sum(held < REQUEST_SECONDS - 1 for held in result.held)
    findings = crowd_findings(result, REQUEST_SECONDS)
    findings.got = (
        f"{result.summary()} ({early} closed before the {REQUEST_SECONDS:g} s deadline); "
        f"every dripper let go by {let_go} from the first's connect; /metrics scrapes "
        f"p50 / p99 / max {latency_ms(scraped.waits)} ms, {len(scraped.waits)} ok, "
        f"{len(scraped.failures)} failed; master RSS {before / 1024:.1f} → {after / 1024:.1f} MiB"
    )
    if scraped.failures:
        findings.faults.append(f"scrapes failed: {scraped.failures[:5]}")
    return findings


@dataclass(frozen=True)
class Attack:
    name: str
    does: str
    run: Callable[[Arena], Findings]


def attacks(counts: Counts) -> list[Attack]:
    c = counts
    return [
        Attack(
            "handshake flood",
            f"{c.flood} TCP connections send a TLS record header (5 bytes) and stall; "
            "each closed one reopened",
            handshake_flood,
        ),
        Attack("idle connections", f"{c.idle} TCP connections send nothing", idle_connections),
        Attack(
            "slowloris",
            f"{c.slowloris} TLS connections drip a header byte every {DRIP_SECONDS:g} s",
            slowloris,
        ),
        Attack(
            "Content-Length stall",
            f"{c.length_stalls} TLS connections: a whole head with Content-Length 100000, "
            f"then a body byte every {DRIP_SECONDS:g} s",
            length_stall,
        ),
        Attack(
            "chunked drip",
            f"{c.chunked_drips} TLS connections: a chunked head, then `1\\r\\n \\r\\n` every "
            f"{DRIP_SECONDS:g} s",
            chunked_drip,
        ),
        Attack(
            "Expect drip",
            f"{c.expect_drips} TLS connections: Expect: 100-continue, Content-Length 100000, "
            f"then a body byte every {DRIP_SECONDS:g} s",
            expect_drip,
        ),
        Attack(
            "oversized body",
            f"{c.oversized_length} clients send Content-Length 9 MiB and its body (again each "
            f"{OVERSIZED_LENGTH_PAUSE:g} s), {c.oversized_chunked} send a 9 MiB chunked body "
            "back to back",
            oversized_body,
        ),
        Attack(
            "pipelining",
            f"{c.pipelined} reviews and a closing GET /healthz in one write on one connection, "
            f"again each {PIPELINE_PAUSE:g} s",
            pipelining,
        ),
        Attack(
            "smuggling",
            f"{len(SMUGGLING_HEADS)} ambiguous POST heads, each with a GET /healthz behind it "
            f"in the same write, again each {SMUGGLE_PAUSE:g} s",
            smuggling,
        ),
        Attack(
            "metrics-port drips",
            f"{c.metrics_drips} plain TCP clients drip a header byte every {DRIP_SECONDS:g} s "
            f"to the metrics port, while /metrics is scraped every {SCRAPE_EVERY:g} s",
            metrics_drips,
        ),
    ]


# --- running them ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogCounts:
    tracebacks: int
    five_xx: Counter[int]
    errors: int

    @classmethod
    def of(cls, server: WebhookServer) -> LogCounts:
        text = server.log()
        five_xx: Counter[int] = Counter()
        errors = 0
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            status = record.get("httpStatus")
            if isinstance(status, int) and status >= 500:
                five_xx[status] += 1
            errors += record.get("level") in ("error", "critical")
        return cls(text.count("Traceback"), five_xx, errors)

    @property
    def unexpected_five_xx(self) -> int:
        """5xx other than 501, the front's answer to a transfer coding it does not serve."""
        return sum(count for status, count in self.five_xx.items() if status != 501)

    def summary(self) -> str:
        shown = ", ".join(f"{s} x{n}" for s, n in sorted(self.five_xx.items())) or "0"
        return f"{self.tracebacks} Traceback, 5xx {shown}, {self.errors} error lines"


@dataclass(frozen=True)
class Report:
    attack: Attack
    probe: ProbeResult
    findings: Findings
    log: LogCounts
    seconds: float

    @property
    def faults(self) -> list[str]:
        faults = list(self.findings.faults)
        if self.probe.failures:
            shown = Counter(self.probe.failures).most_common(3)
            faults.append(f"{len(self.probe.failures)} probe failures: {shown}")
        if self.log.tracebacks:
            faults.append(f"{self.log.tracebacks} tracebacks in the log")
        if self.log.unexpected_five_xx:
            faults.append(f"{self.log.unexpected_five_xx} 5xx answers (not 501) in the log")
        return faults

    def line(self) -> str:
        text = (
            f"{self.attack.name} ({self.seconds:.0f} s): probe {len(self.probe.waits)} reviews, "
            f"p50 / p99 / max {latency_ms(self.probe.waits)} ms, "
            f"{len(self.probe.failures)} failures | attacker: {self.findings.got} | "
            f"log: {self.log.summary()}"
        )
        for detail in self.findings.details:
            text += f"\n    {detail}"
        for fault in self.faults:
            text += f"\n    FAULT: {fault}"
        return text

    def row(self) -> str:
        cells = [self.attack.name, self.attack.does, self.probe.summary(), self.findings.got]
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def raise_file_limit(counts: Counts) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Each attacker socket, and its peer in the server (which inherits the limit), is a file.
    largest = max(getattr(counts, f.name) for f in fields(counts))
    wanted = min(hard, max(soft, 4 * largest + 1024))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def start(server: WebhookServer) -> None:
    """Start the server, a second time after a pause if the first fails (a policy file caught
    mid-edit, say); the second failure is raised."""
    try:
        server.start()
    except RuntimeError as error:
        print(f"the server did not start, trying again: {str(error).strip()[-200:]}", flush=True)
        time.sleep(START_RETRY_PAUSE)
        server.start()


def run_attack(attack: Attack, counts: Counts, seconds: float, scratch: Path) -> Report:
    metrics_port = free_port()
    server = WebhookServer(
        REPO_ROOT / "policies",
        scratch / "certs",
        scratch / f"{attack.name.replace(' ', '-')}.log",
        {"METRICS_BIND": f"127.0.0.1:{metrics_port}"},
    )
    start(server)
    try:
        context = ssl.create_default_context(cafile=str(server.certificates.ca_cert))
        started = time.monotonic()
        arena = Arena(server, metrics_port, counts, started + seconds, context)
        with ThreadPoolExecutor(2, thread_name_prefix=attack.name) as pool:
            probing = pool.submit(probe, server, arena.deadline)
            attacking = pool.submit(attack.run, arena)
            findings = attacking.result()
            probed = probing.result()
        took = time.monotonic() - started
    finally:
        server.stop()
    return Report(attack, probed, findings, LogCounts.of(server), took)


def table(reports: list[Report]) -> str:
    lines = [
        "| attack | what it does | probe p50 / p99 / max (ms), failures | what the attacker got |",
        "| --- | --- | --- | --- |",
        *(report.row() for report in reports),
        "",
        "Server log per attack: "
        + "; ".join(f"{r.attack.name}: {r.log.summary()}" for r in reports)
        + ".",
    ]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.adversarial")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="each attack's window")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--only", default="", help="comma-separated attack names")
    for each in fields(Counts):
        flag = "--" + each.name.replace("_", "-")
        parser.add_argument(flag, type=int, default=each.default, dest=each.name)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    counts = Counts(**{each.name: getattr(args, each.name) for each in fields(Counts)})
    chosen = {name.strip() for name in args.only.split(",") if name.strip()}
    matrix = [attack for attack in attacks(counts) if not chosen or attack.name in chosen]
    raise_file_limit(counts)
    started = time.monotonic()
    reports = []
    with tempfile.TemporaryDirectory() as scratch:
        for attack in matrix:
            report = run_attack(attack, counts, args.seconds, Path(scratch))
            print(report.line(), flush=True)
            reports.append(report)
    markdown = table(reports)
    print(f"\n{markdown}\ntotal {time.monotonic() - started:.0f} s")
    if args.markdown is not None:
        args.markdown.write_text(markdown)
    faults = [fault for report in reports for fault in report.faults]
    return 1 if faults else 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
