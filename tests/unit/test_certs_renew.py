"""Renewal of a certificate directory: `renew` keeps the CA and is a no-op while the serving
certificate has more than the renewal window left; `dev` follows the same window."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509

from webhook.certs import (
    CAUnusable,
    CertificatePaths,
    create_ca,
    dev_hosts,
    ensure_dev_certificates,
    issue_serving_certificate,
    main,
    renew_directory,
    service_hosts,
    write_certificate,
    write_private_key,
)
from webhook.certs.pem import load_certificate, load_private_key


def load(path: Path) -> x509.Certificate:
    cert = load_certificate(path.read_bytes())
    assert cert is not None
    return cert


def snapshot(paths: CertificatePaths) -> dict[str, tuple[bytes, int]]:
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in paths.all()}


def dns_names(path: Path) -> list[str]:
    san = load(path).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(name.value) for name in san]


def shorten_serving_certificate(
    paths: CertificatePaths, days: int, hosts: list[str] | None = None
) -> None:
    ca_key = load_private_key(paths.ca_key.read_bytes())
    assert ca_key is not None
    cert, key = issue_serving_certificate(load(paths.ca_cert), ca_key, hosts or dev_hosts(), days)
    write_private_key(paths.key, key)
    write_certificate(paths.cert, cert)


@pytest.fixture
def paths(tmp_path: Path) -> CertificatePaths:
    return ensure_dev_certificates(tmp_path / "certs")[0]


def test_renew_is_a_no_op_while_the_certificate_is_not_due(paths: CertificatePaths) -> None:
    before = snapshot(paths)

    renewal = renew_directory(paths.cert.parent)

    assert not renewal.changed
    assert renewal.action == "keep"
    assert snapshot(paths) == before


def test_renew_issues_a_serving_certificate_from_the_same_ca_when_due(
    paths: CertificatePaths,
) -> None:
    shorten_serving_certificate(paths, 20)
    before = snapshot(paths)

    renewal = renew_directory(paths.cert.parent)

    assert renewal.action == "reissue"
    assert "within the renewal window of 30 days" in renewal.reason
    after = snapshot(paths)
    assert after["ca.crt"] == before["ca.crt"]
    assert after["ca.key"] == before["ca.key"]
    assert after["tls.crt"][0] != before["tls.crt"][0]
    cert = load(paths.cert)
    cert.verify_directly_issued_by(load(paths.ca_cert))
    assert cert.not_valid_after_utc - datetime.now(UTC) > timedelta(days=364)
    assert dns_names(paths.cert) == dev_hosts()
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(paths.cert.stat().st_mode) == 0o644


def test_the_renewal_window_decides(paths: CertificatePaths) -> None:
    shorten_serving_certificate(paths, 20)
    before = snapshot(paths)

    assert not renew_directory(paths.cert.parent, renew_before=timedelta(days=10)).changed
    assert snapshot(paths) == before
    assert renew_directory(paths.cert.parent, renew_before=timedelta(days=21)).changed


def test_dev_renews_within_the_same_window(paths: CertificatePaths) -> None:
    shorten_serving_certificate(paths, 20)
    ca_before = paths.ca_cert.read_bytes()

    assert ensure_dev_certificates(paths.cert.parent) == (paths, True)

    assert paths.ca_cert.read_bytes() == ca_before
    assert load(paths.cert).not_valid_after_utc - datetime.now(UTC) > timedelta(days=364)


def test_renew_covers_new_names_with_the_same_ca(paths: CertificatePaths) -> None:
    ca_before = paths.ca_cert.read_bytes()

    renewal = renew_directory(paths.cert.parent, service_hosts("wh", "ns"))

    assert renewal.action == "reissue"
    assert renewal.reason == (
        "the serving certificate does not cover wh, wh.ns, wh.ns.svc, wh.ns.svc.cluster.local"
    )
    assert paths.ca_cert.read_bytes() == ca_before
    assert dns_names(paths.cert) == service_hosts("wh", "ns")


def replace_ca_with_one_expiring_soon(paths: CertificatePaths) -> None:
    ca_cert, ca_key = create_ca("short-lived", 10)
    write_private_key(paths.ca_key, ca_key)
    write_certificate(paths.ca_cert, ca_cert)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.ca_key.unlink(), id="missing-ca.key"),
        pytest.param(lambda p: p.ca_cert.write_text("not a certificate"), id="broken-ca.crt"),
        pytest.param(replace_ca_with_one_expiring_soon, id="ca-expiring"),
    ],
)
def test_renew_never_replaces_the_ca(paths: CertificatePaths, damage) -> None:
    shorten_serving_certificate(paths, 20)
    damage(paths)
    before = {path.name: path.read_bytes() for path in paths.all() if path.exists()}

    with pytest.raises(CAUnusable, match="renew keeps the CA so that its caBundle stays valid"):
        renew_directory(paths.cert.parent)

    assert {path.name: path.read_bytes() for path in paths.all() if path.exists()} == before


# --- the command line ----------------------------------------------------------------------


def test_cli_renew_says_what_it_did(
    paths: CertificatePaths, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = str(paths.cert.parent)

    assert main(["renew", "--dir", directory]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{directory}: nothing changed, the serving certificate is valid until ")

    shorten_serving_certificate(paths, 20)
    assert main(["renew", "--dir", directory, "--renew-before-days", "10"]) == 0
    assert "nothing changed" in capsys.readouterr().out

    assert main(["renew", "--dir", directory]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{directory}: serving certificate renewed from the same CA, valid until")
    assert out.count("\n") == 1


def test_cli_renew_without_a_ca_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["renew", "--dir", str(tmp_path), "--host", "localhost"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "error: there is no usable CA certificate (ca.crt); renew keeps the CA so that its "
        "caBundle stays valid: make a new CA with `dev` (and publish its caBundle) instead\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_cli_dev_covers_a_service_as_well(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    argv = ["dev", "--dir", str(tmp_path), "--service", "wh", "--namespace", "ns"]
    assert main(argv) == 0
    capsys.readouterr()
    assert dns_names(tmp_path / "tls.crt") == [
        "localhost",
        "127.0.0.1",
        "::1",
        *service_hosts("wh", "ns"),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["dev", "--service", "wh"], "--service and --namespace go together"),
        (["renew", "--namespace", "ns"], "--service and --namespace go together"),
        (["dev", "--renew-before-days", "365"], "the renewal window must be 0 to 364 days"),
        (["renew", "--renew-before-days", "-3"], "the renewal window must be 0 to 364 days"),
    ],
)
def test_cli_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err
