"""When the serving certificate expires, read from its file.

gunicorn loads the certificate file for every new connection, so the file is what new
connections are served. It is parsed again only when its identity changes (device, inode,
size, mtime, through links): a rotated certificate, such as a new Secret swapped in by kubelet,
shows up at the next look, and an unchanged one costs a stat.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cryptography import x509

from webhook.file_identity import FileIdentity, file_identity

log = logging.getLogger("webhook")


class CertificateExpiry:
    def __init__(self, path: Path) -> None:
        self.path = path
        # (identity of the file that was read, its notAfter); identity None: it was not there.
        self._seen: tuple[FileIdentity | None, float | None] | None = None

    def not_after(self) -> float | None:
        """The notAfter of the file's first certificate, in Unix time; None when the file
        cannot be read or holds no certificate (logged once per state of the file)."""
        try:
            identity = file_identity(self.path)
        except OSError as error:
            return self._remember(None, None, f"cannot be read: {error.strerror}")
        seen = self._seen
        if seen is not None and seen[0] == identity:
            return seen[1]
        try:
            certificate = x509.load_pem_x509_certificate(self.path.read_bytes())
        except (OSError, ValueError) as error:
            return self._remember(identity, None, f"holds no PEM certificate: {error}")
        return self._remember(identity, certificate.not_valid_after_utc.timestamp(), None)

    def _remember(
        self, identity: FileIdentity | None, not_after: float | None, problem: str | None
    ) -> float | None:
        seen = self._seen
        if problem is not None and (seen is None or seen != (identity, None)):
            log.warning("the serving certificate %s %s", self.path, problem)
        # One assignment, so a concurrent scrape sees the old pair or the new one.
        self._seen = (identity, not_after)
        return not_after
