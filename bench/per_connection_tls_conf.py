"""The webhook's gunicorn configuration with gunicorn's own TLS behaviour: a new SSL context,
certificate and key read from disk, for every connection. The baseline that caching the
context is measured against: `gunicorn -c python:bench.per_connection_tls_conf`.

gunicorn reads every public name of a configuration module, so the star import carries the
settings and the hooks (on_starting, pre_fork, child_exit, when_ready, on_exit, logger_class)
over unchanged.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from webhook.server.gunicorn_conf import *  # noqa: F403


def ssl_context(config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]) -> Any:
    return default_ssl_context_factory()
