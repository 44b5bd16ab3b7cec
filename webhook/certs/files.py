"""Certificate files in a directory: their names, atomic writes with exact modes, reading."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
from cryptography.x509 import Certificate

from webhook.certs.pem import certificate_pem, key_pem
from webhook.certs.renewal import CA_CERT, CA_KEY, FILE_NAMES, TLS_CERT, TLS_KEY

CERT_MODE = 0o644
KEY_MODE = 0o600
_KEY_NAMES = (CA_KEY, TLS_KEY)


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
            ca_cert=directory / CA_CERT,
            ca_key=directory / CA_KEY,
            cert=directory / TLS_CERT,
            key=directory / TLS_KEY,
        )

    def all(self) -> tuple[Path, Path, Path, Path]:
        return (self.ca_cert, self.ca_key, self.cert, self.key)


def prepare_directory(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)


def read_files(directory: Path) -> dict[str, bytes]:
    """The certificate files `directory` holds, by name; missing or unreadable ones are left
    out."""
    found: dict[str, bytes] = {}
    for name in FILE_NAMES:
        try:
            found[name] = (Path(directory) / name).read_bytes()
        except OSError:
            continue
    return found


def write_files(directory: Path, files: Mapping[str, bytes], before: Mapping[str, bytes]) -> None:
    """Write the files whose content differs from `before`; keys first, each 0600."""
    for name in sorted(files, key=lambda name: name not in _KEY_NAMES):
        if files[name] != before.get(name):
            mode = KEY_MODE if name in _KEY_NAMES else CERT_MODE
            write_atomic(Path(directory) / name, files[name], mode)


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write `data` to `path` via a private temp file in the same directory, then rename."""
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
    """Write `key` as unencrypted PKCS#8 PEM, readable by the owner only (0600)."""
    write_atomic(path, key_pem(key), KEY_MODE)


def write_certificate(path: Path, cert: Certificate) -> None:
    """Write `cert` as PEM, world-readable (0644)."""
    write_atomic(path, certificate_pem(cert), CERT_MODE)
