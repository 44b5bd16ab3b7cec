"""A real server whose TLS files are the visible links of a directory laid out as kubelet
mounts a Secret, and the certificates a renewal writes into it."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from tests.support.server import REPO_ROOT, MountedConfigMap, WebhookServer
from webhook.certs import CertificatePaths, dev_hosts, ensure_dev_certificates
from webhook.certs.issue import issue_serving_certificate
from webhook.certs.pem import certificate_pem, key_pem, load_certificate, load_private_key


def serving_files(paths: CertificatePaths) -> dict[str, str]:
    """A new serving certificate and key from the development CA: what renewal writes to the
    Secret. Each call makes a new key."""
    ca_cert = load_certificate(paths.ca_cert.read_bytes())
    ca_key = load_private_key(paths.ca_key.read_bytes())
    assert ca_cert is not None and ca_key is not None
    cert, key = issue_serving_certificate(ca_cert, ca_key, dev_hosts())
    return {"tls.crt": certificate_pem(cert).decode(), "tls.key": key_pem(key).decode()}


def peer_serial(https: http.client.HTTPSConnection) -> int:
    """The serial number of the certificate the server presented on this connection."""
    assert https.sock is not None
    der = https.sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def serial_of(files: dict[str, str]) -> int:
    cert = load_certificate(files["tls.crt"].encode())
    assert cert is not None
    return cert.serial_number


@dataclass
class Mounted:
    server: WebhookServer
    mount: MountedConfigMap
    ca: CertificatePaths


@contextmanager
def server_on_mounted_tls(directory: Path) -> Iterator[Mounted]:
    """Started on a first certificate from a development CA in `directory`, stopped after."""
    ca_dir = directory / "dev-ca"
    ca = ensure_dev_certificates(ca_dir)[0]
    # The layout kubelet gives a Secret volume is the one it gives a ConfigMap.
    mount = MountedConfigMap(directory / "tls")
    mount.publish(serving_files(ca))
    files = {
        "TLS_CERT_FILE": str(mount.directory / "tls.crt"),
        "TLS_KEY_FILE": str(mount.directory / "tls.key"),
    }
    server = WebhookServer(REPO_ROOT / "policies", ca_dir, directory / "gunicorn.log", files)
    server.start()
    try:
        yield Mounted(server, mount, ca)
    finally:
        server.stop()
