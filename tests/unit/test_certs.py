from __future__ import annotations

import ipaddress
import socket
import ssl
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook import certs
from webhook.certs import (
    CertificatePaths,
    create_ca,
    dev_hosts,
    ensure_dev_certificates,
    issue_serving_certificate,
    main,
    service_hosts,
    write_certificate,
    write_private_key,
)

# --- helpers -----------------------------------------------------------------------------


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _ext(cert: x509.Certificate, cls: type) -> x509.Extension:
    return cert.extensions.get_extension_for_class(cls)


def _snapshot(paths: CertificatePaths) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in paths.all()}


def _key_usage_flags(cert: x509.Certificate) -> dict[str, bool]:
    usage = _ext(cert, x509.KeyUsage).value
    names = [
        "digital_signature",
        "content_commitment",
        "key_encipherment",
        "data_encipherment",
        "key_agreement",
        "key_cert_sign",
        "crl_sign",
    ]
    return {name: getattr(usage, name) for name in names}


@pytest.fixture(scope="module")
def ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    return create_ca("test CA", 30)


@pytest.fixture(scope="module")
def dev_dir(tmp_path_factory: pytest.TempPathFactory) -> CertificatePaths:
    paths, written = ensure_dev_certificates(tmp_path_factory.mktemp("dev"))
    assert written
    return paths


# --- host lists ----------------------------------------------------------------------------


def test_dev_hosts() -> None:
    assert dev_hosts() == ["localhost", "127.0.0.1", "::1"]


def test_service_hosts() -> None:
    assert service_hosts("gpu-webhook", "gpu-system") == [
        "gpu-webhook",
        "gpu-webhook.gpu-system",
        "gpu-webhook.gpu-system.svc",
        "gpu-webhook.gpu-system.svc.cluster.local",
    ]


def test_certificate_paths_use_kubernetes_secret_names(tmp_path: Path) -> None:
    paths = CertificatePaths.in_directory(tmp_path)
    assert paths == CertificatePaths(
        ca_cert=tmp_path / "ca.crt",
        ca_key=tmp_path / "ca.key",
        cert=tmp_path / "tls.crt",
        key=tmp_path / "tls.key",
    )
    with pytest.raises(AttributeError):
        paths.cert = tmp_path / "other"  # type: ignore[misc]


# --- CA ------------------------------------------------------------------------------------


def test_ca_is_self_signed_p256_with_clock_skew(ca) -> None:
    cert, key = ca
    assert isinstance(key.curve, ec.SECP256R1)
    assert cert.subject == cert.issuer
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "test CA"
    cert.verify_directly_issued_by(cert)
    now = datetime.now(UTC)
    assert now - timedelta(minutes=6) < cert.not_valid_before_utc < now - timedelta(minutes=4)
    assert cert.not_valid_after_utc - now > timedelta(days=29, hours=23)


def test_ca_extensions(ca) -> None:
    cert, key = ca
    basic = _ext(cert, x509.BasicConstraints)
    assert basic.critical
    assert basic.value.ca is True
    assert basic.value.path_length == 0
    assert _ext(cert, x509.KeyUsage).critical
    assert _key_usage_flags(cert) == {
        "digital_signature": True,
        "content_commitment": False,
        "key_encipherment": False,
        "data_encipherment": False,
        "key_agreement": False,
        "key_cert_sign": True,
        "crl_sign": True,
    }
    expected_ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    assert _ext(cert, x509.SubjectKeyIdentifier).value == expected_ski


@pytest.mark.parametrize("days", [0, -1])
def test_non_positive_lifetime_is_rejected(days: int, ca) -> None:
    with pytest.raises(ValueError, match="valid_days"):
        create_ca("x", days)
    with pytest.raises(ValueError, match="valid_days"):
        issue_serving_certificate(*ca, ["localhost"], days)


# --- serving certificate -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hosts", "dns", "ips"),
    [
        (["localhost", "127.0.0.1", "::1"], ["localhost"], ["127.0.0.1", "::1"]),
        (
            service_hosts("wh", "ns"),
            ["wh", "wh.ns", "wh.ns.svc", "wh.ns.svc.cluster.local"],
            [],
        ),
        (["10.0.0.7"], [], ["10.0.0.7"]),
        (["b.example", "a.example", "fd00::5"], ["b.example", "a.example"], ["fd00::5"]),
    ],
)
def test_serving_certificate_sans(hosts: list[str], dns: list[str], ips: list[str], ca) -> None:
    cert, _ = issue_serving_certificate(*ca, hosts, 10)
    san = _ext(cert, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == dns
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address(ip) for ip in ips]
    assert len(san) == len(hosts)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == hosts[0]


def test_serving_certificate_is_signed_by_ca(ca) -> None:
    ca_cert, ca_key = ca
    cert, key = issue_serving_certificate(ca_cert, ca_key, ["localhost"], 10)
    cert.verify_directly_issued_by(ca_cert)
    assert cert.issuer == ca_cert.subject
    assert isinstance(key.curve, ec.SECP256R1)
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"
    other_ca, _ = create_ca("other", 10)
    with pytest.raises(ValueError):
        cert.verify_directly_issued_by(other_ca)


def test_serving_certificate_extensions(ca) -> None:
    ca_cert, ca_key = ca
    cert, key = issue_serving_certificate(ca_cert, ca_key, ["localhost"], 10)
    basic = _ext(cert, x509.BasicConstraints)
    assert basic.critical
    assert basic.value.ca is False
    assert _ext(cert, x509.KeyUsage).critical
    assert _key_usage_flags(cert) == {
        "digital_signature": True,
        "content_commitment": False,
        "key_encipherment": False,
        "data_encipherment": False,
        "key_agreement": False,
        "key_cert_sign": False,
        "crl_sign": False,
    }
    assert list(_ext(cert, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    ca_ski = _ext(ca_cert, x509.SubjectKeyIdentifier).value
    aki = _ext(cert, x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    ski = _ext(cert, x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(key.public_key())


def test_serving_certificate_serials_are_random_and_validity_is_bounded(ca) -> None:
    ca_cert, ca_key = ca
    first, _ = issue_serving_certificate(ca_cert, ca_key, ["localhost"], 10)
    second, _ = issue_serving_certificate(ca_cert, ca_key, ["localhost"], 10)
    assert first.serial_number != second.serial_number
    assert first.serial_number.bit_length() > 64
    now = datetime.now(UTC)
    assert first.not_valid_before_utc < now - timedelta(minutes=4)
    # Never outlives its issuer (the fixture CA lives 30 days).
    long_lived, _ = issue_serving_certificate(ca_cert, ca_key, ["localhost"], 365)
    assert long_lived.not_valid_after_utc == ca_cert.not_valid_after_utc


def test_long_first_host_gets_empty_subject_and_critical_san(ca) -> None:
    host = "a-very-long-webhook-service-name.a-long-namespace-name.svc.cluster.local"
    assert len(host) > 64
    cert, _ = issue_serving_certificate(*ca, [host], 10)
    assert len(cert.subject) == 0
    san = _ext(cert, x509.SubjectAlternativeName)
    assert san.critical
    assert san.value.get_values_for_type(x509.DNSName) == [host]


@pytest.mark.parametrize("hosts", [[], [""], ["bad host"], [" localhost"], ["é.example"]])
def test_unusable_hosts_are_rejected(hosts: list[str], ca) -> None:
    with pytest.raises(ValueError):
        issue_serving_certificate(*ca, hosts, 10)


# --- writing -------------------------------------------------------------------------------


def test_written_files_have_expected_modes_and_round_trip(tmp_path: Path, ca) -> None:
    cert, key = ca
    key_path, cert_path = tmp_path / "k.key", tmp_path / "c.crt"
    write_private_key(key_path, key)
    write_certificate(cert_path, cert)
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cert_path.stat().st_mode) == 0o644
    assert key_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert _load(cert_path) == cert
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.crt", "k.key"]


def test_overwriting_a_key_keeps_it_private(tmp_path: Path, ca) -> None:
    key_path = tmp_path / "k.key"
    key_path.write_text("old")
    key_path.chmod(0o644)
    write_private_key(key_path, ca[1])
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in key_path.read_bytes()


# --- ensure_dev_certificates ----------------------------------------------------------------


def test_ensure_creates_a_consistent_set(dev_dir: CertificatePaths) -> None:
    ca_cert, cert = _load(dev_dir.ca_cert), _load(dev_dir.cert)
    cert.verify_directly_issued_by(ca_cert)
    for key_path in (dev_dir.key, dev_dir.ca_key):
        assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    san = _ext(cert, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    now = datetime.now(UTC)
    assert ca_cert.not_valid_after_utc - now > timedelta(days=certs.CA_VALID_DAYS - 1)
    assert cert.not_valid_after_utc - now > timedelta(days=certs.SERVING_VALID_DAYS - 1)


def test_ensure_creates_missing_directory(tmp_path: Path) -> None:
    paths, written = ensure_dev_certificates(tmp_path / "a" / "b", ["localhost"])
    assert written
    assert all(path.is_file() for path in paths.all())


def test_second_ensure_writes_nothing(tmp_path: Path) -> None:
    paths, _ = ensure_dev_certificates(tmp_path)
    before = _snapshot(paths)
    mtimes = {path.name: path.stat().st_mtime_ns for path in paths.all()}
    assert ensure_dev_certificates(tmp_path) == (paths, False)
    # A subset of the covered hosts, in another order, is still satisfied.
    assert ensure_dev_certificates(tmp_path, ["::1", "LOCALHOST"]) == (paths, False)
    assert _snapshot(paths) == before
    assert {path.name: path.stat().st_mtime_ns for path in paths.all()} == mtimes


def test_missing_host_reissues_serving_cert_only(tmp_path: Path) -> None:
    paths, _ = ensure_dev_certificates(tmp_path)
    before = _snapshot(paths)
    hosts = [*dev_hosts(), "webhook.local"]
    assert ensure_dev_certificates(tmp_path, hosts) == (paths, True)
    after = _snapshot(paths)
    assert after["ca.crt"] == before["ca.crt"]
    assert after["ca.key"] == before["ca.key"]
    assert after["tls.crt"] != before["tls.crt"]
    assert after["tls.key"] != before["tls.key"]
    cert = _load(paths.cert)
    cert.verify_directly_issued_by(_load(paths.ca_cert))
    assert "webhook.local" in _ext(cert, x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    )


def _corrupt(path: Path) -> None:
    path.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot a certificate\n")


def _replace_with_foreign_key(path: Path) -> None:
    write_private_key(path, ec.generate_private_key(ec.SECP256R1()))


def _replace_with_short_lived_cert(paths: CertificatePaths) -> None:
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    cert, key = issue_serving_certificate(_load(paths.ca_cert), ca_key, dev_hosts(), 3)
    write_private_key(paths.key, key)
    write_certificate(paths.cert, cert)


def _replace_with_foreign_cert(paths: CertificatePaths) -> None:
    foreign = create_ca("foreign", 10)
    cert, key = issue_serving_certificate(*foreign, dev_hosts(), 10)
    write_private_key(paths.key, key)
    write_certificate(paths.cert, cert)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: _corrupt(p.cert), id="corrupted-tls.crt"),
        pytest.param(lambda p: p.cert.unlink(), id="missing-tls.crt"),
        pytest.param(lambda p: p.key.unlink(), id="missing-tls.key"),
        pytest.param(lambda p: _replace_with_foreign_key(p.key), id="mismatched-tls.key"),
        pytest.param(_replace_with_short_lived_cert, id="expiring-within-7-days"),
        pytest.param(_replace_with_foreign_cert, id="signed-by-another-ca"),
    ],
)
def test_broken_serving_cert_is_replaced_and_ca_kept(tmp_path: Path, damage) -> None:
    paths, _ = ensure_dev_certificates(tmp_path)
    before = _snapshot(paths)
    damage(paths)
    assert ensure_dev_certificates(tmp_path) == (paths, True)
    after = _snapshot(paths)
    assert after["ca.crt"] == before["ca.crt"]
    assert after["ca.key"] == before["ca.key"]
    cert = _load(paths.cert)
    cert.verify_directly_issued_by(_load(paths.ca_cert))
    assert cert.not_valid_after_utc - datetime.now(UTC) > timedelta(days=300)
    assert ensure_dev_certificates(tmp_path) == (paths, False)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.ca_cert.unlink(), id="missing-ca.crt"),
        pytest.param(lambda p: p.ca_key.unlink(), id="missing-ca.key"),
        pytest.param(lambda p: _corrupt(p.ca_cert), id="corrupted-ca.crt"),
        pytest.param(lambda p: _replace_with_foreign_key(p.ca_key), id="mismatched-ca.key"),
    ],
)
def test_broken_ca_is_replaced_and_serving_cert_reissued(tmp_path: Path, damage) -> None:
    paths, _ = ensure_dev_certificates(tmp_path)
    before = _snapshot(paths)
    damage(paths)
    assert ensure_dev_certificates(tmp_path) == (paths, True)
    after = _snapshot(paths)
    assert after["ca.crt"] != before["ca.crt"]
    assert after["tls.crt"] != before["tls.crt"]
    ca_cert = _load(paths.ca_cert)
    _load(paths.cert).verify_directly_issued_by(ca_cert)
    assert stat.S_IMODE(paths.ca_key.stat().st_mode) == 0o600
    assert ensure_dev_certificates(tmp_path) == (paths, False)


def test_ensure_rejects_a_file_as_directory(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(NotADirectoryError):
        ensure_dev_certificates(target)


def test_ensure_rejects_empty_host_list_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        ensure_dev_certificates(tmp_path / "d", [])
    assert not (tmp_path / "d").exists()


# --- real TLS handshake --------------------------------------------------------------------


def _handshake(paths: CertificatePaths, cafile: Path, server_hostname: str) -> bytes:
    """Serve one TLS connection with the generated cert and connect as a verifying client."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(paths.cert, paths.key)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(5)
        port = listener.getsockname()[1]

        def serve() -> None:
            try:
                conn, _ = listener.accept()
                conn.settimeout(5)
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
            except OSError:  # includes ssl.SSLError when the client rejects us
                pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            client_ctx = ssl.create_default_context(cafile=str(cafile))
            with (
                socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
                client_ctx.wrap_socket(raw, server_hostname=server_hostname) as tls,
            ):
                return tls.recv(2)
        finally:
            thread.join(5)


@pytest.mark.parametrize("server_hostname", ["localhost", "127.0.0.1", "::1"])
def test_tls_handshake_succeeds_with_generated_ca(
    dev_dir: CertificatePaths, server_hostname: str
) -> None:
    assert _handshake(dev_dir, dev_dir.ca_cert, server_hostname) == b"ok"


def test_tls_handshake_fails_with_another_ca(dev_dir: CertificatePaths, tmp_path: Path) -> None:
    other_ca, _ = create_ca("unrelated CA", 10)
    other = tmp_path / "other-ca.crt"
    write_certificate(other, other_ca)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(dev_dir, other, "localhost")


def test_tls_handshake_fails_for_uncovered_name(dev_dir: CertificatePaths) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match=r"(?i)hostname|ip address"):
        _handshake(dev_dir, dev_dir.ca_cert, "webhook.example")


# --- CLI -----------------------------------------------------------------------------------


def test_cli_creates_then_reports_valid(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    directory = tmp_path / "certs"
    assert main(["dev", "--dir", str(directory)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "created" in out
    assert str(directory / "ca.crt") in out

    assert main(["dev", "--dir", str(directory)]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "still valid" in out


def test_cli_hosts_option(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["dev", "--dir", str(tmp_path), "--host", "svc.ns.svc", "--host", "10.1.2.3"]
    assert main(argv) == 0
    capsys.readouterr()
    san = _ext(_load(tmp_path / "tls.crt"), x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["svc.ns.svc"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.1.2.3")]


@pytest.mark.parametrize(
    ("make_argv", "message"),
    [
        (lambda d: ["dev", "--dir", str(d / "file")], "not a directory"),
        (lambda d: ["dev", "--dir", str(d), "--host", "bad host"], "invalid host"),
    ],
)
def test_cli_unusable_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, make_argv, message: str
) -> None:
    (tmp_path / "file").write_text("x")
    assert main(make_argv(tmp_path)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1
    assert message in captured.err
