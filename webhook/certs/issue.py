"""Making keys and certificates: a self-signed CA, and serving certificates it signs. Every key
is ECDSA P-256."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
from cryptography.x509 import Certificate
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.certs.hosts import checked_hosts, parse_host

CA_VALID_DAYS = 3650
SERVING_VALID_DAYS = 365
# Certificates start this far in the past, so a peer whose clock is behind accepts them.
CLOCK_SKEW = timedelta(minutes=5)
_MAX_COMMON_NAME_LENGTH = 64  # X.520 upper bound for commonName

CertificateAndKey = tuple[Certificate, EllipticCurvePrivateKey]


def new_key() -> EllipticCurvePrivateKey:
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


def _serving_subject(first_host: str) -> x509.Name:
    if len(first_host) > _MAX_COMMON_NAME_LENGTH:
        return x509.Name([])
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first_host)])


def create_ca(common_name: str, valid_days: int = CA_VALID_DAYS) -> CertificateAndKey:
    """Create a self-signed CA that may only sign end-entity certificates."""
    key = new_key()
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
    valid_days: int = SERVING_VALID_DAYS,
) -> CertificateAndKey:
    """Issue a TLS server certificate for `hosts`, signed by the CA and never outliving it."""
    hosts = checked_hosts(hosts)
    names = [parse_host(host) for host in hosts]
    subject = _serving_subject(hosts[0])
    key = new_key()
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
