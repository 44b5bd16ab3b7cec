"""Certificate tooling for the admission webhook's TLS endpoint.

Creates a small private CA and ECDSA P-256 serving certificates signed by it, writes them
atomically with safe file modes, and keeps a development certificate directory up to date.

Command line::

    python -m webhook.certs dev [--dir DIR] [--host H ...]
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509 import Certificate
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALID_DAYS = 3650
SERVING_VALID_DAYS = 365
RENEW_BEFORE = timedelta(days=7)
CLOCK_SKEW = timedelta(minutes=5)
DEV_CA_COMMON_NAME = "gpu-admission-webhook development CA"
DEFAULT_DEV_DIRECTORY = Path("certs")
_MAX_COMMON_NAME_LENGTH = 64  # X.520 upper bound for commonName

_CERT_MODE = 0o644
_KEY_MODE = 0o600


@dataclass(frozen=True)
class CertificatePaths:
    """Locations of the CA and serving certificate files (Kubernetes TLS Secret names)."""

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path

    @classmethod
    def in_directory(cls, directory: Path) -> CertificatePaths:
        directory = Path(directory)
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            cert=directory / "tls.crt",
            key=directory / "tls.key",
        )

    def all(self) -> tuple[Path, Path, Path, Path]:
        return (self.ca_cert, self.ca_key, self.cert, self.key)


def dev_hosts() -> list[str]:
    """Names a locally running webhook is reached by."""
    return ["localhost", "127.0.0.1", "::1"]


def service_hosts(service: str, namespace: str) -> list[str]:
    """DNS names the API server may use to reach a webhook Service."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


# --- building certificates -------------------------------------------------------------


def _new_key() -> EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _validity(valid_days: int) -> tuple[datetime, datetime]:
    if valid_days <= 0:
        raise ValueError(f"valid_days must be positive, got {valid_days}")
    now = datetime.now(UTC)
    return now - CLOCK_SKEW, now + timedelta(days=valid_days)


def _key_usage(*, key_cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=key_cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _parse_host(host: str) -> x509.GeneralName:
    if not host or host != host.strip() or any(ch.isspace() for ch in host):
        raise ValueError(f"invalid host name: {host!r}")
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _unique(hosts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(hosts))


def _serving_subject(first_host: str) -> x509.Name:
    if len(first_host) > _MAX_COMMON_NAME_LENGTH:
        return x509.Name([])
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first_host)])


def create_ca(common_name: str, valid_days: int) -> tuple[Certificate, EllipticCurvePrivateKey]:
    """Create a self-signed ECDSA P-256 CA that may only sign end-entity certificates."""
    key = _new_key()
    not_before, not_after = _validity(valid_days)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    public_key = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue_serving_certificate(
    ca_cert: Certificate,
    ca_key: EllipticCurvePrivateKey,
    hosts: list[str],
    valid_days: int,
) -> tuple[Certificate, EllipticCurvePrivateKey]:
    """Issue an ECDSA P-256 TLS server certificate for ``hosts`` signed by the CA."""
    hosts = _unique(hosts)
    if not hosts:
        raise ValueError("at least one host is required")
    names = [_parse_host(host) for host in hosts]
    subject = _serving_subject(hosts[0])
    key = _new_key()
    not_before, not_after = _validity(valid_days)
    not_after = min(not_after, ca_cert.not_valid_after_utc)
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        # RFC 5280 4.2.1.6: SAN must be critical when the subject is empty.
        .add_extension(x509.SubjectAlternativeName(names), critical=len(subject) == 0)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(key_cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


# --- writing files ---------------------------------------------------------------------


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` via a private temp file in the same directory."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)  # exact mode, independent of the umask
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_private_key(path: Path, key: EllipticCurvePrivateKey) -> None:
    """Write ``key`` as unencrypted PKCS#8 PEM, readable by the owner only (0600)."""
    data = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )
    _write_atomic(path, data, _KEY_MODE)


def write_certificate(path: Path, cert: Certificate) -> None:
    """Write ``cert`` as PEM, world-readable (0644)."""
    _write_atomic(path, cert.public_bytes(serialization.Encoding.PEM), _CERT_MODE)


# --- loading and checking existing files -----------------------------------------------


def _load_certificate(path: Path) -> Certificate | None:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return None


def _load_private_key(path: Path) -> EllipticCurvePrivateKey | None:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm):
        return None
    return key if isinstance(key, EllipticCurvePrivateKey) else None


def _public_key_der(key: CertificatePublicKeyTypes) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _key_matches(cert: Certificate, key: EllipticCurvePrivateKey) -> bool:
    return _public_key_der(cert.public_key()) == _public_key_der(key.public_key())


def _is_current(cert: Certificate, now: datetime) -> bool:
    return cert.not_valid_before_utc <= now + CLOCK_SKEW and (
        cert.not_valid_after_utc - now > RENEW_BEFORE
    )


def _is_ca(cert: Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _load_ca(
    paths: CertificatePaths, now: datetime
) -> tuple[Certificate, EllipticCurvePrivateKey] | None:
    """Return the existing CA pair if it loads, matches and is still usable."""
    cert = _load_certificate(paths.ca_cert)
    key = _load_private_key(paths.ca_key)
    if cert is None or key is None:
        return None
    if not (_key_matches(cert, key) and _is_ca(cert) and _is_current(cert, now)):
        return None
    return cert, key


def _issued_by(cert: Certificate, ca_cert: Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _san_key(name: x509.GeneralName) -> str:
    """Comparable form of a SAN entry: normalised IP text or lower-cased DNS name."""
    if isinstance(name, x509.IPAddress):
        return str(name.value)
    return str(name.value).lower()


def _covers(cert: Certificate, hosts: Iterable[str]) -> bool:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    present = {_san_key(name) for name in san}
    return all(_san_key(_parse_host(host)) in present for host in hosts)


def _serving_is_valid(
    paths: CertificatePaths, ca_cert: Certificate, hosts: list[str], now: datetime
) -> bool:
    cert = _load_certificate(paths.cert)
    key = _load_private_key(paths.key)
    if cert is None or key is None:
        return False
    return (
        _key_matches(cert, key)
        and _issued_by(cert, ca_cert)
        and _covers(cert, hosts)
        and _is_current(cert, now)
    )


# --- development certificates ----------------------------------------------------------


def _prepare_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)


def ensure_dev_certificates(
    directory: Path, hosts: list[str] | None = None
) -> tuple[CertificatePaths, bool]:
    """Make ``directory`` hold a usable CA and serving certificate for ``hosts``.

    Existing valid files are left untouched.  A valid CA is kept and only the serving
    certificate is re-issued; a new CA is created only when it is missing or broken.
    Returns the paths and whether anything was written.
    """
    directory = Path(directory)
    hosts = _unique(dev_hosts() if hosts is None else hosts)
    if not hosts:
        raise ValueError("at least one host is required")
    for host in hosts:
        _parse_host(host)
    _prepare_directory(directory)
    paths = CertificatePaths.in_directory(directory)
    now = datetime.now(UTC)

    ca = _load_ca(paths, now)
    if ca is not None and _serving_is_valid(paths, ca[0], hosts, now):
        return paths, False
    if ca is None:
        ca = create_ca(DEV_CA_COMMON_NAME, CA_VALID_DAYS)
        write_private_key(paths.ca_key, ca[1])
        write_certificate(paths.ca_cert, ca[0])
    cert, key = issue_serving_certificate(ca[0], ca[1], hosts, SERVING_VALID_DAYS)
    write_private_key(paths.key, key)
    write_certificate(paths.cert, cert)
    return paths, True


# --- command line ----------------------------------------------------------------------


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webhook.certs", description="Webhook TLS certificate tooling."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser(
        "dev", help="create or refresh a development CA and serving certificate"
    )
    dev.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DEV_DIRECTORY,
        help=f"certificate directory (default: {DEFAULT_DEV_DIRECTORY})",
    )
    dev.add_argument(
        "--host",
        action="append",
        dest="hosts",
        metavar="H",
        help="DNS name or IP address to cover; repeatable (default: localhost, 127.0.0.1, ::1)",
    )
    return parser


def _run_dev(directory: Path, hosts: list[str] | None) -> str:
    paths, written = ensure_dev_certificates(directory, hosts)
    if written:
        return f"created certificates in {directory}; CA certificate: {paths.ca_cert}"
    return f"existing certificates in {directory} are still valid; CA certificate: {paths.ca_cert}"


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        message = _run_dev(args.dir, args.hosts)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
