"""Settings, read from the environment once into a frozen object."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from webhook.bind_address import parse_bind
from webhook.kube.label_modes import CLAIM_TEMPLATES_VARIABLE, NODE_MODE_VARIABLE
from webhook.kube.label_modes import MODE_VARIABLE as NAMESPACE_LABELS_VARIABLE
from webhook.kube.label_modes import MODES as NAMESPACE_LABEL_MODES

MAX_BODY_BYTES = 8 * 2**20
LOG_FORMATS = ("json", "text")
FRONTS = ("evented", "threads")
WORKERS = ("keepalive", "gthread", "gevent")
ON_OFF = ("on", "off")
# gunicorn's levels; it would take any other word for info without a word.
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    bind: str = "127.0.0.1:8443"
    policy_dir: Path = Path("policies")
    cert_file: Path = Path("certs/tls.crt")
    key_file: Path = Path("certs/tls.key")
    workers: int = 2
    threads: int = 4
    log_level: str = "info"
    # json: one JSON object per line, for a log pipeline; text: gunicorn's layout, for a terminal.
    log_format: str = "json"
    # host:port of the plain-HTTP metrics port (the master serves every worker's); "" for none.
    metrics_bind: str = ""
    max_body_bytes: int = MAX_BODY_BYTES
    # How often each worker looks for a changed policy directory; 0 turns live reload off.
    policy_reload_seconds: float = 1.0
    # Where the last good policy set and the metrics of all workers are kept. None: the
    # gunicorn master creates a temporary directory and exports it here to its workers.
    state_dir: Path | None = None
    # Where namespace labels come from: auto, in-cluster, kubeconfig or off.
    namespace_labels: str = "auto"
    # Which API the nodes' MIG profiles are read from, for MIG policies (same modes).
    node_inventory: str = "auto"
    # Where DRA policies' ResourceClaimTemplates are made (same modes); off: by someone else,
    # from `review`'s output.
    claim_templates: str = "auto"
    # How long a client may stay silent within a TLS handshake or a request; 0: for ever.
    client_stall_seconds: float = 10.0
    # evented: handshakes and request reads on each worker's main thread (worker/front.py);
    # threads: on the pool threads, as gunicorn's gthread does (for comparison in the bench).
    front: str = "evented"
    # A new connection's handshake and its first request bytes, then each request whole.
    first_bytes_seconds: float = 1.0
    request_seconds: float = 10.0
    # How long a client of the metrics port has for its request's head, and again for its answer.
    metrics_request_seconds: float = 10.0
    # Open connections per worker; at the cap the oldest idle one is closed for a new one.
    max_connections: int = 500
    # Switches for the benchmark's comparison of what each piece of the serving edge buys:
    # keepalive: edge/worker.py; gthread: gunicorn's own worker (no front, no balancing, no
    # next request on the same thread); gevent: gunicorn's stock evented worker (gevent is a
    # development requirement only).
    worker: str = "keepalive"
    # on: /readyz on the admission port shows what the metrics port's /status does, for a
    # server only trusted clients reach (a test, a debugging session on loopback).
    readyz_details: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        defaults = cls()
        state_dir = env.get("STATE_DIR", "")
        return cls(
            bind=env.get("BIND", defaults.bind),
            policy_dir=Path(env.get("POLICY_DIR", str(defaults.policy_dir))),
            cert_file=Path(env.get("TLS_CERT_FILE", str(defaults.cert_file))),
            key_file=Path(env.get("TLS_KEY_FILE", str(defaults.key_file))),
            workers=_positive_int(env, "WORKERS", defaults.workers),
            threads=_positive_int(env, "THREADS", defaults.threads),
            log_level=_choice(env, "LOG_LEVEL", defaults.log_level, LOG_LEVELS),
            log_format=_choice(env, "LOG_FORMAT", defaults.log_format, LOG_FORMATS),
            metrics_bind=_bind(env, "METRICS_BIND", defaults.metrics_bind),
            policy_reload_seconds=_seconds(
                env, "POLICY_RELOAD_SECONDS", defaults.policy_reload_seconds, shortest=0.01
            ),
            state_dir=Path(state_dir) if state_dir else None,
            namespace_labels=_choice(
                env, NAMESPACE_LABELS_VARIABLE, defaults.namespace_labels, NAMESPACE_LABEL_MODES
            ),
            node_inventory=_choice(
                env, NODE_MODE_VARIABLE, defaults.node_inventory, NAMESPACE_LABEL_MODES
            ),
            claim_templates=_choice(
                env, CLAIM_TEMPLATES_VARIABLE, defaults.claim_templates, NAMESPACE_LABEL_MODES
            ),
            client_stall_seconds=_seconds(
                env, "CLIENT_STALL_SECONDS", defaults.client_stall_seconds
            ),
            front=_choice(env, "FRONT", defaults.front, FRONTS),
            first_bytes_seconds=_positive_seconds(
                env, "FIRST_BYTES_SECONDS", defaults.first_bytes_seconds
            ),
            request_seconds=_positive_seconds(env, "REQUEST_SECONDS", defaults.request_seconds),
            metrics_request_seconds=_positive_seconds(
                env, "METRICS_REQUEST_SECONDS", defaults.metrics_request_seconds
            ),
            max_connections=_positive_int(env, "MAX_CONNECTIONS", defaults.max_connections),
            worker=_choice(env, "WORKER", defaults.worker, WORKERS),
            readyz_details=_choice(env, "READYZ_DETAILS", "off", ON_OFF) == "on",
        )


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{name}={text!r} is not a whole number") from None
    if value < 1:
        raise SettingsError(f"{name}={text!r} must be at least 1")
    return value


def _seconds(env: Mapping[str, str], name: str, default: float, shortest: float = 0.0) -> float:
    """A number of seconds; 0 means off, and any other value must be at least `shortest`."""
    text = env.get(name)
    if text is None or text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise SettingsError(f"{name}={text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise SettingsError(f"{name}={text!r} must be 0 (off) or a positive number of seconds")
    if 0 < value < shortest:
        raise SettingsError(f"{name}={text!r} must be 0 (off) or at least {shortest} seconds")
    return value


def _positive_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    value = _seconds(env, name, default, shortest=0.01)
    if value == 0:
        raise SettingsError(f"{name}=0: a limit is needed here, at least 0.01 seconds")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    text = (env.get(name) or default).lower()
    if text not in choices:
        raise SettingsError(f"{name}={text!r} is not one of {', '.join(choices)}")
    return text


def _bind(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, default).strip()
    if value:
        try:
            parse_bind(value)
        except ValueError as error:
            raise SettingsError(f"{name}: {error}") from None
    return value
