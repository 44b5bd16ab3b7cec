"""The TLS context cache: one context while the files stay, a new one for a rotated pair, the
last good one while a pair does not load. Real certificates from the webhook.certs helpers,
and real handshakes over a socket pair to see which certificate a context presents."""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support.server import MountedConfigMap
from webhook.certs import (
    create_ca,
    dev_hosts,
    issue_serving_certificate,
    write_certificate,
    write_private_key,
)
from webhook.certs.pem import certificate_pem, key_pem
from webhook.server.edge.tls_context import LOAD_ATTEMPTS, TLSContextCache


@dataclass(frozen=True)
class Pair:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def serial(self) -> int:
        return self.certificate.serial_number

    def files(self) -> dict[str, str]:
        return {
            "tls.crt": certificate_pem(self.certificate).decode(),
            "tls.key": key_pem(self.key).decode(),
        }


@dataclass(frozen=True)
class Authority:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    file: Path

    def issue(self) -> Pair:
        return Pair(*issue_serving_certificate(self.certificate, self.key, dev_hosts()))


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    certificate, key = create_ca("tls context test CA")
    file = tmp_path_factory.mktemp("ca") / "ca.crt"
    write_certificate(file, certificate)
    return Authority(certificate, key, file)


class Files:
    """A certificate and key as plain files, each replaced atomically."""

    def __init__(self, directory: Path) -> None:
        self.cert = directory / "tls.crt"
        self.key = directory / "tls.key"

    def write(self, pair: Pair, *, key_of: Pair | None = None) -> None:
        write_certificate(self.cert, pair.certificate)
        write_private_key(self.key, (key_of or pair).key)


class Factory:
    """Builds contexts as gunicorn's default factory does, and counts its calls."""

    def __init__(self, files: Files) -> None:
        self.files = files
        self.calls = 0

    def __call__(self) -> ssl.SSLContext:
        self.calls += 1
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certfile=str(self.files.cert), keyfile=str(self.files.key))
        return context


def presented_serial(context: ssl.SSLContext, ca_file: Path) -> int:
    """Handshake with `context` as the server; the serial of the certificate it presents."""
    client_context = ssl.create_default_context(cafile=str(ca_file))
    server_end, client_end = socket.socketpair()
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            with context.wrap_socket(server_end, server_side=True) as tls:
                tls.recv(1)
        except (OSError, ssl.SSLError) as error:
            failures.append(error)

    server = threading.Thread(target=serve)
    server.start()
    try:
        with client_context.wrap_socket(client_end, server_hostname="localhost") as tls:
            der = tls.getpeercert(binary_form=True)
            tls.sendall(b"x")
    finally:
        server.join(10)
    assert failures == [] and der is not None
    return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def cached(files: Files) -> Callable[[Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    cache = TLSContextCache()
    return lambda factory: cache.context(str(files.cert), str(files.key), factory)


def test_the_context_is_built_once_while_the_files_stay(files: Files, authority: Authority) -> None:
    pair = authority.issue()
    files.write(pair)
    factory = Factory(files)
    context = cached(files)

    first = context(factory)
    assert all(context(factory) is first for _ in range(5))
    assert factory.calls == 1
    assert presented_serial(first, authority.file) == pair.serial


def test_a_replaced_pair_gives_a_new_context_that_presents_it(
    files: Files, authority: Authority
) -> None:
    files.write(authority.issue())
    factory = Factory(files)
    context = cached(files)
    before = context(factory)

    renewed = authority.issue()
    files.write(renewed)
    after = context(factory)
    assert after is not before
    assert presented_serial(after, authority.file) == renewed.serial
    assert context(factory) is after
    assert factory.calls == 2


def test_a_secret_swapped_by_its_data_link_gives_a_new_context(
    tmp_path: Path, authority: Authority
) -> None:
    mount = MountedConfigMap(tmp_path / "secret")
    mount.publish(authority.issue().files())
    files = Files(mount.directory)
    factory = Factory(files)
    context = cached(files)
    before = context(factory)

    renewed = authority.issue()
    mount.publish(renewed.files())
    after = context(factory)
    assert after is not before
    assert presented_serial(after, authority.file) == renewed.serial


def test_a_pair_that_does_not_load_keeps_the_last_good_context_and_is_logged_once(
    files: Files, authority: Authority, caplog: pytest.LogCaptureFixture
) -> None:
    good = authority.issue()
    files.write(good)
    factory = Factory(files)
    context = cached(files)
    before = context(factory)

    files.write(authority.issue(), key_of=good)
    with caplog.at_level(logging.ERROR, logger="webhook"):
        served = [context(factory) for _ in range(5)]
    assert all(each is before for each in served)
    assert presented_serial(before, authority.file) == good.serial
    # Tried again a few times, then not again until the files change.
    assert factory.calls == 1 + LOAD_ATTEMPTS
    assert len([r for r in caplog.records if "do not load" in r.getMessage()]) == 1

    repaired = authority.issue()
    files.write(repaired)
    assert presented_serial(context(factory), authority.file) == repaired.serial


def test_a_first_pair_that_does_not_load_is_an_error(files: Files, authority: Authority) -> None:
    files.write(authority.issue(), key_of=authority.issue())
    factory = Factory(files)
    with pytest.raises(ssl.SSLError):
        cached(files)(factory)
    assert factory.calls == LOAD_ATTEMPTS


def test_a_half_swapped_pair_is_read_again(files: Files, authority: Authority) -> None:
    renewed = authority.issue()
    files.write(authority.issue())
    factory = Factory(files)
    context = cached(files)
    context(factory)

    # The new certificate is in place; the new key lands while the first read fails.
    write_certificate(files.cert, renewed.certificate)

    def read_while_the_key_is_swapped() -> ssl.SSLContext:
        try:
            return factory()
        finally:
            if factory.calls == 2:
                write_private_key(files.key, renewed.key)

    served = context(read_while_the_key_is_swapped)
    assert presented_serial(served, authority.file) == renewed.serial
    assert context(factory) is served
    assert factory.calls == 3


def test_a_pair_replaced_during_the_read_is_read_again_at_the_next_connection(
    files: Files, authority: Authority
) -> None:
    first, second = authority.issue(), authority.issue()
    files.write(first)
    factory = Factory(files)
    context = cached(files)

    def read_then_replace() -> ssl.SSLContext:
        built = factory()
        files.write(second)
        return built

    during = context(read_then_replace)
    assert presented_serial(during, authority.file) == first.serial
    after = context(factory)
    assert after is not during
    assert presented_serial(after, authority.file) == second.serial
    assert context(factory) is after


def test_threads_asking_at_once_after_a_change_build_one_context(
    files: Files, authority: Authority
) -> None:
    files.write(authority.issue())
    factory = Factory(files)
    context = cached(files)
    context(factory)
    files.write(authority.issue())

    start = threading.Barrier(8)
    results: list[ssl.SSLContext] = []

    def ask() -> None:
        start.wait()
        results.append(context(factory))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(results) == 8 and len({id(each) for each in results}) == 1
    assert factory.calls == 2
