"""The admission service behind the routes: each route is a method here, which decodes, decides
and encodes, then counts and logs the answer. What they share (the policy store, the cluster's
namespace labels, node inventory and template maker, the metrics) is built once, in `start`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from time import perf_counter
from typing import Any

from flask import Response, jsonify, request
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
from webhook.server.metrics import WebhookMetrics
from webhook.server.settings import Settings
from webhook.server.worker_status import WorkerStatusFile, readiness

log = logging.getLogger("webhook")

ENDPOINT_PATHS: dict[str, Endpoint] = {"/mutate": "mutate", "/validate": "validate"}
Reply = Response | tuple[Response, int]


class AdmissionService:
    def __init__(
        self,
        settings: Settings,
        store: PolicyStore,
        metrics: WebhookMetrics,
        labels: NamespaceLabelSource,
        nodes: OnDemandNodeInventory,
        templates: OnDemandClaimTemplates,
    ) -> None:
        self._settings = settings
        self._store = store
        self._metrics = metrics
        self._labels = labels
        self._nodes = nodes
        self._templates = templates
        self._max_body = settings.max_body_bytes

    @classmethod
    def start(
        cls,
        settings: Settings,
        policies: PolicySet | None = None,
        namespace_labels: NamespaceLabelSource | None = None,
    ) -> AdmissionService:
        """Loads the policies unless given them and, when live reload is on, starts the thread
        that reloads them: call it in the process that serves, after any fork. A policy
        directory that does not load, with no last good snapshot to serve instead, raises
        PolicyLoadError, so a server never starts on a half-read policy. Namespace labels come
        from the Kubernetes API as settings.namespace_labels says, unless given."""
        metrics = WebhookMetrics(settings.cert_file, cached_bytes)
        observers: list[ReloadObserver] = [metrics]
        labels = namespace_labels
        if labels is None:
            on_demand = OnDemandLabelSource(settings.namespace_labels)
            observers.append(on_demand)
            labels = on_demand
        nodes = OnDemandNodeInventory(settings.node_inventory)
        templates = OnDemandClaimTemplates(settings.claim_templates)
        observers += [nodes, templates]
        if settings.state_dir is not None:
            observers.append(WorkerStatusFile(settings.state_dir, settings.policy_reload_seconds))
        store = _policy_store(settings, policies, observers)
        metrics.start_publishing()
        return cls(settings, store, metrics, labels, nodes, templates)

    # Routes ----------------------------------------------------------------------------------

    def mutate(self) -> Reply:
        return self.review("mutate")

    def validate(self) -> Reply:
        return self.review("validate")

    def healthz(self) -> Reply:
        return jsonify(status="ok"), 200

    def readyz(self) -> Reply:
        # A probe needs no more; the details are on the metrics port (worker_status.py).
        settings = self._settings
        if not settings.readyz_details:
            return jsonify(status="ready"), 200
        store = self._store
        details = readiness(store.current, store.status, settings.policy_reload_seconds)
        return jsonify(details), 200

    def metrics(self) -> Response:
        body, content_type = self._metrics.render(request.headers.get("Accept"))
        return Response(body, 200, content_type=content_type)

    def http_error(self, error: HTTPException) -> Reply:
        return _error(error.code or 500, error.description or error.name)

    # Reviews ---------------------------------------------------------------------------------

    def review(self, endpoint: Endpoint) -> Reply:
        # Read off the WSGI environ: werkzeug's parsed headers and wrapped input stream cost
        # as much as judging a pod, and a review needs neither.
        environ = request.environ
        declared = environ.get("CONTENT_LENGTH", "")
        # isdigit alone takes "²" and other digits int() refuses.
        if declared and not (declared.isascii() and declared.isdigit()):
            # gunicorn refuses such a request itself; another WSGI server may pass it on.
            return self.rejected(endpoint, 400, "the Content-Length header is not a number")
        # Read before the type is judged: a body left unread would be read as the next request
        # of a kept-alive connection. One over the limit is refused unread (the evented front
        # answers it first, and closes the connection).
        try:
            body = _read_body(environ, declared, self._max_body)
        except Exception as error:
            # The server's reader refused the body's framing (a trailer the evented front let
            # by, which gunicorn reads past before it refuses it): the client's fault, never
            # a 500.
            return self.rejected(endpoint, 400, f"the body could not be read: {error}")
        if body is None:
            return self.rejected(
                endpoint, 413, f"the body is larger than {self._max_body // 2**20} MiB"
            )
        if not _is_json(environ.get("CONTENT_TYPE", "")):
            return self.rejected(
                endpoint, 415, "the body must be an AdmissionReview sent as application/json"
            )
        started = perf_counter()
        try:
            envelope = decode_envelope(body)
        except ReviewDecodeError as error:
            return self.rejected(endpoint, 400, str(error))
        served = self._store.current.policy_set
        admission = judge(envelope, served, endpoint, self._labels, _log_fault, self._nodes)
        if admission.verdict.companions and endpoint == "mutate":
            admission = _with_companions_made(admission, self._templates)
        reply = Response(admission.body(), 200, content_type="application/json")
        record = AdmissionRecord.of(endpoint, admission, perf_counter() - started)
        self._metrics.admitted(record)
        log_admission(record)
        return reply

    def rejected(self, endpoint: Endpoint, code: int, reason: str) -> tuple[Response, int]:
        self._metrics.rejected(endpoint)
        log_rejection(endpoint, code, reason)
        return _error(code, reason)

    def refused_at_front(self, path: str, status: int | None, reason: str) -> None:
        """What the serving edge answered itself (edge/served_app.py), counted and logged as
        the service's own refusals are."""
        endpoint = ENDPOINT_PATHS.get(path)
        if endpoint is not None:
            self._metrics.rejected(endpoint)
            log_rejection(endpoint, status, reason)
        else:
            log_client_fault(path, status, reason)


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
