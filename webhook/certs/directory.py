"""A certificate directory: the development set `make certs` keeps, and `renew`, which only
ever issues a new serving certificate from the CA already there."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cryptography import x509

from webhook.certs.files import CertificatePaths, prepare_directory, read_files, write_files
from webhook.certs.hosts import checked_hosts, dev_hosts
from webhook.certs.pem import load_certificate
from webhook.certs.renewal import (
    DEFAULT_RENEW_BEFORE_DAYS,
    TLS_CERT,
    CAUnusable,
    Renewal,
    renew,
)

DEV_CA_COMMON_NAME = "gpu-admission-webhook development CA"
DEFAULT_DEV_DIRECTORY = Path("certs")
DEFAULT_RENEW_BEFORE = timedelta(days=DEFAULT_RENEW_BEFORE_DAYS)


def ensure_dev_certificates(
    directory: Path,
    hosts: list[str] | None = None,
    *,
    renew_before: timedelta = DEFAULT_RENEW_BEFORE,
) -> tuple[CertificatePaths, bool]:
    """Make `directory` hold a usable CA and serving certificate for `hosts`.

    Valid files are left untouched. A valid CA is kept and only the serving certificate is
    issued again; a new CA is made only when it is missing, broken or about to expire.
    Returns the paths and whether anything was written.
    """
    directory = Path(directory)
    hosts = checked_hosts(dev_hosts() if hosts is None else hosts)
    prepare_directory(directory)
    stored = read_files(directory)
    renewal = renew(stored, hosts, renew_before=renew_before, ca_common_name=DEV_CA_COMMON_NAME)
    write_files(directory, renewal.files, stored)
    return CertificatePaths.in_directory(directory), renewal.changed


def renew_directory(
    directory: Path,
    hosts: list[str] | None = None,
    *,
    renew_before: timedelta = DEFAULT_RENEW_BEFORE,
) -> Renewal:
    """Issue a new serving certificate from the directory's CA when the current one expires
    within `renew_before` or does not cover `hosts` (by default, the names it covers now).
    Never replaces the CA: raises CAUnusable when it cannot sign."""
    directory = Path(directory)
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")
    stored = read_files(directory)
    if hosts is None:
        hosts = _covered_names(stored.get(TLS_CERT))
        if not hosts:
            raise ValueError(
                f"{directory / TLS_CERT} names no hosts to renew for: give --host, "
                "or --service and --namespace"
            )
    try:
        renewal = renew(
            stored,
            hosts,
            renew_before=renew_before,
            ca_common_name=DEV_CA_COMMON_NAME,
            allow_new_ca=False,
        )
    except CAUnusable as error:
        raise CAUnusable(
            f"{error}; renew keeps the CA so that its caBundle stays valid: make a new CA "
            "with `dev` (and publish its caBundle) instead"
        ) from None
    write_files(directory, renewal.files, stored)
    return renewal


def _covered_names(cert_pem: bytes | None) -> list[str]:
    cert = load_certificate(cert_pem)
    if cert is None:
        return []
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(name.value) for name in san if isinstance(name, x509.DNSName | x509.IPAddress)]
