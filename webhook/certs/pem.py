"""PEM encoding and lenient decoding: what does not parse is None, never an exception."""

from __future__ import annotations

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
from cryptography.x509 import Certificate


def key_pem(key: EllipticCurvePrivateKey) -> bytes:
    """Unencrypted PKCS#8: whoever can read the file or Secret holds the key anyway."""
    return key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )


def certificate_pem(cert: Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def load_certificate(data: bytes | None) -> Certificate | None:
    """The first certificate in `data`, or None."""
    if not data:
        return None
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError:
        return None


def load_private_key(data: bytes | None) -> EllipticCurvePrivateKey | None:
    if not data:
        return None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return None
    return key if isinstance(key, EllipticCurvePrivateKey) else None
