"""Certificate rotation on the real server: gunicorn's TLS files are the visible links of a
directory laid out as kubelet mounts a Secret, and a renewed certificate is published by
swapping the `..data` link. New connections get the new certificate, with no restart, while
kept-alive connections, and the requests in flight on them during the swap, go on without a
failure, and so do handshakes that start during the swap itself."""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.mounted_tls import (
    Mounted,
    peer_serial,
    serial_of,
    server_on_mounted_tls,
    serving_files,
)
from tests.support.server import FRACTIONAL_POD_REVIEW, WebhookServer
from webhook.certs import dev_hosts
from webhook.certs.issue import create_ca, issue_serving_certificate
from webhook.certs.pem import certificate_pem, key_pem

REVIEW = FRACTIONAL_POD_REVIEW.read_bytes()
MAX_REQUESTS_PER_THREAD = 5000
DEADLINE_SECONDS = 20
# Swaps this often keep kubelet's atomic writer busy far beyond real life (it publishes a
# Secret's change once per sync), so that a handshake that overlaps a swap is all but certain.
MAX_SWAPS = 150
SWAP_INTERVAL = 0.02


class Connection:
    """One HTTPS connection to the server, trusting only the development CA. Unlike the
    suite's client it never retries, so a failed request shows."""

    def __init__(self, port: int, ca_file: Path) -> None:
        context = ssl.create_default_context(cafile=str(ca_file))
        self.https = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
        self.https.connect()

    @property
    def serial(self) -> int:
        return peer_serial(self.https)

    def review(self) -> int:
        """POST an AdmissionReview; the HTTP status, after checking the answer is one."""
        headers = {"Content-Type": "application/json"}
        self.https.request("POST", "/mutate", body=REVIEW, headers=headers)
        response = self.https.getresponse()
        body = response.read()
        if response.status == 200:
            assert json.loads(body)["response"]["allowed"] is True
        return response.status

    def close(self) -> None:
        self.https.close()


@dataclass
class Load:
    """Clients that keep asking while certificates change, each outcome recorded. `fresh`
    threads make every request on a new connection, so each one is a new handshake, which
    makes the server read the files again; `kept_alive` threads reuse one connection."""

    server: WebhookServer
    fresh: int = 0
    kept_alive: int = 0
    # What the clients trust; the development CA when None.
    ca_file: Path | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    serials: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    kept_alive_requests: int = 0
    threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Load:
        targets = [self._fresh_connections] * self.fresh + [self._kept_alive] * self.kept_alive
        for target in targets:
            thread = threading.Thread(target=target, daemon=True)
            self.threads.append(thread)
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(DEADLINE_SECONDS)

    def _connect(self) -> Connection:
        return Connection(self.server.port, self.ca_file or self.server.certificates.ca_cert)

    def requests(self) -> int:
        with self.lock:
            return len(self.serials) + self.kept_alive_requests

    def _fresh_connections(self) -> None:
        for _ in range(MAX_REQUESTS_PER_THREAD):
            if self.stop.is_set():
                return
            try:
                connection = self._connect()
                try:
                    status = connection.review()
                    serial = connection.serial
                finally:
                    connection.close()
            except Exception as error:  # any failure is the finding
                self._fail(f"new connection: {error!r}")
                continue
            with self.lock:
                if status != 200:
                    self.failures.append(f"new connection: HTTP {status}")
                self.serials.append(serial)

    def _kept_alive(self) -> None:
        try:
            connection = self._connect()
        except Exception as error:
            self._fail(f"kept-alive connection: {error!r}")
            return
        try:
            for _ in range(MAX_REQUESTS_PER_THREAD):
                if self.stop.is_set():
                    return
                status = connection.review()
                with self.lock:
                    self.kept_alive_requests += 1
                    if status != 200:
                        self.failures.append(f"kept-alive connection: HTTP {status}")
        except Exception as error:
            self._fail(f"kept-alive connection: {error!r}")
        finally:
            connection.close()

    def _fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)

    def failed(self) -> bool:
        with self.lock:
            return bool(self.failures)

    def wait(self, *, requests: int) -> None:
        """Until `requests` more have been made, or one failed, or the deadline."""
        with self.lock:
            target = len(self.serials) + self.kept_alive_requests + requests
        deadline = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < deadline:
            with self.lock:
                if self.failures or len(self.serials) + self.kept_alive_requests >= target:
                    return
            time.sleep(0.01)
        raise AssertionError(f"the clients made fewer than {requests} requests in time")


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mounted]:
    with server_on_mounted_tls(tmp_path_factory.mktemp("rotation")) as mounted:
        yield mounted


def test_a_renewed_certificate_is_served_without_a_restart(mounted: Mounted) -> None:
    server = mounted.server
    old_serial = serial_of({"tls.crt": (mounted.mount.directory / "tls.crt").read_text()})
    kept = Connection(server.port, server.certificates.ca_cert)
    assert kept.serial == old_serial
    assert kept.review() == 200
    workers = server.worker_pids()

    # Requests in flight on open connections while the Secret's files are swapped.
    with Load(server, kept_alive=3) as load:
        load.wait(requests=30)
        renewed = serving_files(mounted.ca)
        mounted.mount.publish(renewed)
        load.wait(requests=30)
    assert load.failures == [], server.log()

    # Every new connection gets the new certificate.
    new_serial = serial_of(renewed)
    for _ in range(20):
        fresh = Connection(server.port, server.certificates.ca_cert)
        assert fresh.serial == new_serial
        assert fresh.review() == 200
        fresh.close()

    # The connection opened before the swap still works, on the certificate it was given.
    assert kept.review() == 200
    assert kept.serial == old_serial
    kept.close()

    assert server.process is not None and server.process.poll() is None
    assert server.worker_pids() == workers


def test_handshakes_that_start_during_a_swap_all_succeed(mounted: Mounted) -> None:
    with Load(mounted.server, fresh=4) as load:
        load.wait(requests=20)
        for _ in range(MAX_SWAPS):
            if load.failed():
                break
            mounted.mount.publish(serving_files(mounted.ca))
            time.sleep(SWAP_INTERVAL)
        load.wait(requests=20)
    assert load.failures == []
    # The swaps took: new connections met more than one certificate.
    assert len(set(load.serials)) > 1


def test_a_new_ca_rolled_out_with_an_overlapping_bundle_fails_no_request(
    mounted: Mounted, tmp_path: Path
) -> None:
    """The CA itself is replaced, as a renewal near the CA's end does: clients trust the old
    and the new CA for the overlap (a caBundle holding both), the serving pair is swapped to
    one the new CA signed, and kept-alive and new connections go on without a failure."""
    server = mounted.server
    new_ca_cert, new_ca_key = create_ca("gpu-admission rotation test CA")
    bundle = tmp_path / "ca-bundle.crt"
    bundle.write_bytes(server.certificates.ca_cert.read_bytes() + certificate_pem(new_ca_cert))
    cert, key = issue_serving_certificate(new_ca_cert, new_ca_key, dev_hosts())
    renewed = {"tls.crt": certificate_pem(cert).decode(), "tls.key": key_pem(key).decode()}
    started = time.monotonic()
    with Load(server, fresh=2, kept_alive=2, ca_file=bundle) as load:
        load.wait(requests=200)
        mounted.mount.publish(renewed)
        load.wait(requests=1000)
    rate = load.requests() / (time.monotonic() - started)
    print(f"\nCA rotation: {load.requests()} requests at {rate:.0f}/s, {len(load.failures)} failed")
    assert load.failures == [], server.log()
    # Speed is the benchmark's to judge: the load's deadline (`wait`) is what holds it here.
    # New connections now meet the certificate of the new CA.
    assert serial_of(renewed) in load.serials
    fresh = Connection(server.port, bundle)
    assert fresh.serial == serial_of(renewed)
    fresh.close()
