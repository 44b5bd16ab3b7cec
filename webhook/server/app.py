"""The Flask application: routes decode, decide and encode, then count and log the answer."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from time import perf_counter
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from webhook.admission.answer import Admission, judge
from webhook.admission.decide import cached_bytes
from webhook.admission.review import ReviewDecodeError, ReviewEnvelope, decode_envelope
from webhook.admission.verdict import Verdict
from webhook.kube.on_demand_inventory import OnDemandNodeInventory
from webhook.kube.on_demand_labels import OnDemandLabelSource
from webhook.kube.on_demand_templates import OnDemandClaimTemplates, TemplateMaker
from webhook.policy.namespace_labels import NamespaceLabelSource
from webhook.policy.policy_set import PolicySet
from webhook.policy.snapshot import LastGood
from webhook.policy.store import PolicyStore, ReloadObserver
from webhook.server.admission_log import (
    AdmissionRecord,
    Endpoint,
    log_admission,
    log_client_fault,
    log_rejection,
)
from webhook.server.front_refusals import REFUSALS_HOOK
from webhook.server.metrics import WebhookMetrics
from webhook.server.settings import Settings
from webhook.server.worker_status import WorkerStatusFile, readiness

log = logging.getLogger("webhook")

ENDPOINT_PATHS: dict[str, Endpoint] = {"/mutate": "mutate", "/validate": "validate"}


def create_app(
    settings: Settings | None = None,
    policies: PolicySet | None = None,
    namespace_labels: NamespaceLabelSource | None = None,
) -> Flask:
    """The application. Loads the policies unless given them and, when live reload is on,
    starts the thread that reloads them: call it in the process that serves, after any fork.
    A policy directory that does not load, with no last good snapshot to serve instead,
    raises PolicyLoadError, so a server never starts on a half-read policy. Namespace labels
    come from the Kubernetes API as settings.namespace_labels says, unless given."""
    settings = settings or Settings.from_environ()
    metrics = WebhookMetrics(settings.cert_file, cached_bytes)
    observers: list[ReloadObserver] = [metrics]
    labels = namespace_labels
    if labels is None:
        on_demand = OnDemandLabelSource(settings.namespace_labels)
        observers.append(on_demand)
        labels = on_demand
    nodes = OnDemandNodeInventory(settings.node_inventory)
    observers.append(nodes)
    templates = OnDemandClaimTemplates(settings.claim_templates)
    observers.append(templates)
    if settings.state_dir is not None:
        observers.append(WorkerStatusFile(settings.state_dir, settings.policy_reload_seconds))
    store = _policy_store(settings, policies, observers)
    metrics.start_publishing()
    app = Flask("webhook")
    app.extensions["policy_store"] = store
    app.extensions["metrics"] = metrics
    max_body = settings.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]

    def review(endpoint: Endpoint) -> Response | tuple[Response, int]:
        # Read off the WSGI environ: werkzeug's parsed headers and wrapped input stream cost
        # as much as judging a pod, and a review needs neither.
        environ = request.environ
        declared = environ.get("CONTENT_LENGTH", "")
        # isdigit alone takes "²" and other digits int() refuses.
        if declared and not (declared.isascii() and declared.isdigit()):
            # gunicorn refuses such a request itself; another WSGI server may pass it on.
            return rejected(endpoint, 400, "the Content-Length header is not a number")
        # Read before the type is judged: a body left unread would be read as the next request
        # of a kept-alive connection. One over the limit is refused unread (the evented front
        # answers it first, and closes the connection).
        try:
            body = _read_body(environ, declared, max_body)
        except Exception as error:
            # The server's reader refused the body's framing (a trailer the evented front let
            # by, which gunicorn reads past before it refuses it): the client's fault, never
            # a 500.
            return rejected(endpoint, 400, f"the body could not be read: {error}")
        if body is None:
            return rejected(endpoint, 413, f"the body is larger than {max_body // 2**20} MiB")
        if not _is_json(environ.get("CONTENT_TYPE", "")):
            return rejected(
                endpoint, 415, "the body must be an AdmissionReview sent as application/json"
            )
        started = perf_counter()
        try:
            envelope = decode_envelope(body)
        except ReviewDecodeError as error:
            return rejected(endpoint, 400, str(error))
        served = store.current.policy_set
        admission = judge(envelope, served, endpoint, labels, _log_fault, nodes)
        if admission.verdict.companions and endpoint == "mutate":
            admission = _with_companions_made(admission, templates)
        reply = Response(admission.body(), 200, content_type="application/json")
        record = AdmissionRecord.of(endpoint, admission, perf_counter() - started)
        metrics.admitted(record)
        log_admission(record)
        return reply

    def rejected(endpoint: Endpoint, code: int, reason: str) -> tuple[Response, int]:
        metrics.rejected(endpoint)
        log_rejection(endpoint, code, reason)
        return _error(code, reason)

    def refused_at_front(path: str, status: int | None, reason: str) -> None:
        endpoint = ENDPOINT_PATHS.get(path)
        if endpoint is not None:
            metrics.rejected(endpoint)
            log_rejection(endpoint, status, reason)
        else:
            log_client_fault(path, status, reason)

    app.extensions[REFUSALS_HOOK] = refused_at_front

    @app.post("/mutate")
    def mutate() -> Response | tuple[Response, int]:
        return review("mutate")

    @app.post("/validate")
    def validate() -> Response | tuple[Response, int]:
        return review("validate")

    @app.get("/healthz")
    def healthz() -> tuple[Response, int]:
        return jsonify(status="ok"), 200

    @app.get("/readyz")
    def readyz() -> tuple[Response, int]:
        # A probe needs no more; the details are on the metrics port (worker_status.py).
        if not settings.readyz_details:
            return jsonify(status="ready"), 200
        return jsonify(readiness(store.current, store.status, settings.policy_reload_seconds)), 200

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        body, content_type = metrics.render(request.headers.get("Accept"))
        return Response(body, 200, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[Response, int]:
        return _error(error.code or 500, error.description or error.name)

    return app


def _with_companions_made(admission: Admission, maker: TemplateMaker) -> Admission:
    """The admission, once the objects its object needs exist (a DRA share's templates); a
    denial that says why where one could not be made. A dry run makes nothing."""
    request = admission.request
    verdict = admission.verdict
    if request is None or request.dry_run or not verdict.allowed:
        return admission
    problem = maker.ensure(request.namespace, verdict.companions)
    if problem is None:
        return admission
    log.warning("request %s: %s", admission.envelope.uid, problem)
    return replace(admission, verdict=Verdict.errored(problem))


def _log_fault(envelope: ReviewEnvelope, error: Exception) -> str:
    log.exception("unexpected fault while reviewing request %s", envelope.uid)
    return f"the GPU webhook failed on this request (uid {envelope.uid}); its log has details"


def _policy_store(
    settings: Settings, policies: PolicySet | None, observers: Sequence[ReloadObserver]
) -> PolicyStore:
    if policies is not None:
        return PolicyStore.given(policies, settings.policy_dir)
    last_good = LastGood(settings.state_dir) if settings.state_dir is not None else None
    store = PolicyStore.open(settings.policy_dir, last_good=last_good, observers=observers)
    if settings.policy_reload_seconds > 0:
        store.start_watching(settings.policy_reload_seconds)
    return store


def _is_json(content_type: str) -> bool:
    return content_type.partition(";")[0].strip().lower() == "application/json"


def _read_body(environ: dict[str, Any], declared: str, limit: int) -> bytes | None:
    """The request body, or None when it is over `limit` bytes. A declared length (digits) is
    checked before reading; a body of no declared length (chunked, which the server marks as
    wsgi.input_terminated) is read one byte past the limit and no further."""
    stream = environ["wsgi.input"]
    if declared:
        length = int(declared)
        return None if length > limit else stream.read(length)
    if not environ.get("wsgi.input_terminated"):
        return b""
    body = stream.read(limit + 1)
    return None if len(body) > limit else body


def _error(code: int, reason: str) -> tuple[Response, int]:
    body: dict[str, Any] = {"error": reason, "code": code}
    return jsonify(body), code
