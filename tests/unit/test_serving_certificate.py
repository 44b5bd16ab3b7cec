"""The serving certificate's expiry, read from its file and read again only when it changes."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from webhook.server import serving_certificate
from webhook.server.serving_certificate import CertificateExpiry

NOT_AFTER = datetime(2031, 5, 4, 9, 30, tzinfo=UTC)


def certificate_pem(not_after: datetime) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_after - timedelta(days=30))
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM)


def replace(path: Path, data: bytes) -> None:
    """Swap the file for a new one, as kubelet swaps a mounted Secret's files."""
    staged = path.with_name(f".{path.name}.new")
    staged.write_bytes(data)
    os.replace(staged, path)


def test_the_expiry_is_the_certificates_not_after(tmp_path: Path) -> None:
    path = tmp_path / "tls.crt"
    path.write_bytes(certificate_pem(NOT_AFTER) + certificate_pem(NOT_AFTER + timedelta(days=9)))
    # The first certificate of a chain is the serving one.
    assert CertificateExpiry(path).not_after() == NOT_AFTER.timestamp()


def test_a_rotated_certificate_shows_up_and_an_unchanged_one_is_not_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tls.crt"
    path.write_bytes(certificate_pem(NOT_AFTER))
    parsed: list[bytes] = []
    load = serving_certificate.x509.load_pem_x509_certificate

    def counting_load(data: bytes) -> x509.Certificate:
        parsed.append(data)
        return load(data)

    monkeypatch.setattr(serving_certificate.x509, "load_pem_x509_certificate", counting_load)
    expiry = CertificateExpiry(path)
    assert expiry.not_after() == expiry.not_after() == NOT_AFTER.timestamp()
    assert len(parsed) == 1

    renewed = NOT_AFTER + timedelta(days=90)
    replace(path, certificate_pem(renewed))
    assert expiry.not_after() == renewed.timestamp()
    assert len(parsed) == 2


@pytest.mark.parametrize(
    "content",
    [None, b"", b"-----BEGIN CERTIFICATE-----\nnot base64\n"],
    ids=["missing", "empty", "garbage"],
)
def test_a_file_without_a_certificate_has_no_expiry_and_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes | None
) -> None:
    path = tmp_path / "tls.crt"
    if content is not None:
        path.write_bytes(content)
    expiry = CertificateExpiry(path)
    with caplog.at_level(logging.WARNING, logger="webhook"):
        assert expiry.not_after() is None
        assert expiry.not_after() is None
    assert len(caplog.records) == 1
    assert str(path) in caplog.text

    replace(path, certificate_pem(NOT_AFTER))
    assert expiry.not_after() == NOT_AFTER.timestamp()
