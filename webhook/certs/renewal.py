"""Whether a stored CA and serving certificate still serve, and what to write when they do
not. One rule for the development directory, `renew` and the in-cluster Secret.

The stored files are named as in a Kubernetes TLS Secret (`ca.crt`, `ca.key`, `tls.crt`,
`tls.key`). A usable CA is always kept, so the caBundle that trusts it stays valid; only the
serving certificate is issued again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509 import Certificate

from webhook.certs.hosts import checked_hosts, parse_host, san_key
from webhook.certs.issue import (
    CLOCK_SKEW,
    SERVING_VALID_DAYS,
    CertificateAndKey,
    create_ca,
    issue_serving_certificate,
)
from webhook.certs.pem import certificate_pem, key_pem, load_certificate, load_private_key

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
FILE_NAMES = (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)
DEFAULT_RENEW_BEFORE_DAYS = 30

Action = Literal["keep", "reissue", "new-ca"]


@dataclass(frozen=True)
class Renewal:
    """What the stored files should become, and why."""

    action: Action
    reason: str
    files: Mapping[str, bytes]
    ca_cert: Certificate
    cert: Certificate

    @property
    def changed(self) -> bool:
        return self.action != "keep"


class CAUnusable(ValueError):
    """The stored CA cannot sign a new serving certificate, and replacing it is not allowed."""


def renewal_window(days: int) -> timedelta:
    """The renewal window; it must be shorter than a serving certificate's life, or every run
    would issue a certificate that is due at once."""
    if not 0 <= days < SERVING_VALID_DAYS:
        raise ValueError(
            f"the renewal window must be 0 to {SERVING_VALID_DAYS - 1} days, got {days}"
        )
    return timedelta(days=days)


def renew(
    stored: Mapping[str, bytes],
    hosts: Iterable[str],
    *,
    renew_before: timedelta,
    ca_common_name: str,
    allow_new_ca: bool = True,
    now: datetime | None = None,
) -> Renewal:
    """Keep what still serves `hosts` for longer than `renew_before`; else issue a serving
    certificate from the stored CA; else (when allowed) a new CA and serving certificate."""
    hosts = checked_hosts(hosts)
    now = now or datetime.now(UTC)
    ca, ca_problem = usable_ca(stored, renew_before, now)
    if ca is None:
        if not allow_new_ca:
            raise CAUnusable(ca_problem)
        ca = create_ca(ca_common_name)
        ca_files = (certificate_pem(ca[0]), key_pem(ca[1]))
        return _issue(ca, ca_files, hosts, "new-ca", ca_problem)
    problem = serving_problem(stored, ca[0], hosts, renew_before, now)
    if problem is not None:
        # The kept CA keeps its stored bytes: the caBundle is compared with them.
        return _issue(ca, (stored[CA_CERT], stored[CA_KEY]), hosts, "reissue", problem)
    cert = load_certificate(stored[TLS_CERT])
    assert cert is not None  # serving_problem() found it usable
    until = f"{cert.not_valid_after_utc:%Y-%m-%d}"
    days = renew_before.days
    reason = f"the serving certificate is valid until {until}; it is renewed {days} days before"
    files = {name: stored[name] for name in FILE_NAMES}
    return Renewal("keep", reason, files, ca[0], cert)


def _issue(
    ca: CertificateAndKey,
    ca_files: tuple[bytes, bytes],
    hosts: list[str],
    action: Action,
    reason: str,
) -> Renewal:
    cert, key = issue_serving_certificate(*ca, hosts)
    files = {
        CA_CERT: ca_files[0],
        CA_KEY: ca_files[1],
        TLS_CERT: certificate_pem(cert),
        TLS_KEY: key_pem(key),
    }
    return Renewal(action, reason, files, ca[0], cert)


def usable_ca(
    stored: Mapping[str, bytes], renew_before: timedelta, now: datetime
) -> tuple[CertificateAndKey | None, str]:
    """The stored CA pair if it can sign for longer than `renew_before`, else None and why."""
    cert = load_certificate(stored.get(CA_CERT))
    if cert is None:
        return None, f"there is no usable CA certificate ({CA_CERT})"
    key = load_private_key(stored.get(CA_KEY))
    if key is None:
        return None, f"there is no usable CA key ({CA_KEY})"
    if not _same_key(cert.public_key(), key.public_key()):
        return None, f"the CA key ({CA_KEY}) does not match the CA certificate"
    if not _is_ca(cert):
        return None, f"{CA_CERT} is not a CA certificate"
    problem = _time_problem("the CA", cert, renew_before, now)
    if problem is not None:
        return None, problem
    return (cert, key), ""


def serving_problem(
    stored: Mapping[str, bytes],
    ca_cert: Certificate,
    hosts: Iterable[str],
    renew_before: timedelta,
    now: datetime,
) -> str | None:
    """Why the stored serving certificate must be issued again, or None if it serves."""
    cert = load_certificate(stored.get(TLS_CERT))
    if cert is None:
        return f"there is no usable serving certificate ({TLS_CERT})"
    key = load_private_key(stored.get(TLS_KEY))
    if key is None:
        return f"there is no usable serving key ({TLS_KEY})"
    if not _same_key(cert.public_key(), key.public_key()):
        return f"the serving key ({TLS_KEY}) does not match the serving certificate"
    if not _issued_by(cert, ca_cert):
        return "the serving certificate is not signed by the CA"
    missing = uncovered(cert, hosts)
    if missing:
        return f"the serving certificate does not cover {', '.join(missing)}"
    return _time_problem("the serving certificate", cert, renew_before, now)


def uncovered(cert: Certificate, hosts: Iterable[str]) -> list[str]:
    """The hosts that `cert`'s subject alternative names leave out."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return list(hosts)
    present = {san_key(name) for name in san}
    return [host for host in hosts if san_key(parse_host(host)) not in present]


def _time_problem(
    what: str, cert: Certificate, renew_before: timedelta, now: datetime
) -> str | None:
    if cert.not_valid_before_utc > now + CLOCK_SKEW:
        return f"{what} is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC"
    left = cert.not_valid_after_utc - now
    if left <= timedelta(0):
        return f"{what} expired on {cert.not_valid_after_utc:%Y-%m-%d}"
    if left <= renew_before:
        return (
            f"{what} expires on {cert.not_valid_after_utc:%Y-%m-%d}, "
            f"within the renewal window of {renew_before.days} days"
        )
    return None


def _public_der(key: CertificatePublicKeyTypes) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _same_key(one: CertificatePublicKeyTypes, other: CertificatePublicKeyTypes) -> bool:
    return _public_der(one) == _public_der(other)


def _is_ca(cert: Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _issued_by(cert: Certificate, ca_cert: Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
