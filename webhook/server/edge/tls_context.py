"""The TLS context for new connections, built once per worker and again when the files change.

gunicorn asks for a context on every new connection, and its default factory builds one from
scratch each time: the system CA store, the certificate and the key, read and parsed again,
which costs more than the request itself. Here the context is kept, and the certificate and key
files are only stat'ed (through links, as kubelet swaps a Secret's `..data` link): a renewed
pair is loaded for the next connection after the change.

A pair read while it is being replaced does not load (the new key with the old certificate), or
loads while the files change under it; either way it is read again. A pair that still does not
load after a few attempts is logged once, and new connections keep the last good context: a bad
rotation must not take the service down.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

from webhook.file_identity import FileIdentity, file_identity

log = logging.getLogger("webhook")

LOAD_ATTEMPTS = 3
# A load fails with these while a pair is half swapped; they are worth another read.
_TRANSIENT = (ssl.SSLError, FileNotFoundError)

# The paths, then the identity of each file (None: it could not be stat'ed).
_PairIdentity = tuple[str, str | None, FileIdentity | None, FileIdentity | None]


@dataclass(frozen=True)
class _Loaded:
    identity: _PairIdentity
    context: ssl.SSLContext


class TLSContextCache:
    """One worker's TLS context. Safe to call from several threads at once."""

    def __init__(self, attempts: int = LOAD_ATTEMPTS) -> None:
        self._attempts = attempts
        self._lock = threading.Lock()
        # Each replaced in one assignment, so the unlocked reads see a whole value.
        self._loaded: _Loaded | None = None
        self._failed: _PairIdentity | None = None

    def context(
        self, cert_file: str, key_file: str | None, build: Callable[[], ssl.SSLContext]
    ) -> ssl.SSLContext:
        """The context for `cert_file` and `key_file` as they are now. `build` makes a new one
        (gunicorn's factory, which applies its TLS settings); it is called only when the files
        have changed since the last build."""
        identity = _pair_identity(cert_file, key_file)
        loaded = self._loaded
        if loaded is not None and loaded.identity == identity:
            return loaded.context
        with self._lock:
            loaded = self._loaded
            if loaded is not None and loaded.identity == identity:
                return loaded.context
            if loaded is not None and self._failed == identity:
                return loaded.context
            return self._load(cert_file, key_file, build, identity)

    def _load(
        self,
        cert_file: str,
        key_file: str | None,
        build: Callable[[], ssl.SSLContext],
        identity: _PairIdentity,
    ) -> ssl.SSLContext:
        for attempt in range(self._attempts):
            if attempt:
                identity = _pair_identity(cert_file, key_file)
            try:
                context = build()
            except _TRANSIENT as error:
                problem: OSError = error
                continue
            except OSError as error:
                problem = error
                break
            if _pair_identity(cert_file, key_file) == identity:
                # Kept only when the files did not change during the read; otherwise this
                # connection gets what was read, and the next one reads the files again.
                if self._loaded is not None:
                    log.info("TLS certificate %s loaded again after a change", cert_file)
                self._loaded = _Loaded(identity, context)
                self._failed = None
            return context
        previous = self._loaded
        if previous is None:
            raise problem
        if self._failed != identity:
            log.error(
                "the TLS certificate %s and key %s do not load (%s); new connections are "
                "served the certificate loaded before, until the files change again",
                cert_file,
                key_file or cert_file,
                problem,
            )
            self._failed = identity
        return previous.context


def _pair_identity(cert_file: str, key_file: str | None) -> _PairIdentity:
    return (
        cert_file,
        key_file,
        _file_identity(cert_file),
        None if key_file is None else _file_identity(key_file),
    )


def _file_identity(path: str) -> FileIdentity | None:
    try:
        return file_identity(path)
    except OSError:
        return None
