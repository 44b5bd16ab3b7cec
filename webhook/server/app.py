"""The Flask application: routes decode, decide and encode, nothing more."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from webhook.admission.decide import decide
from webhook.admission.review import (
    MalformedRequest,
    ReviewDecodeError,
    decode_envelope,
    encode_response,
    read_request,
)
from webhook.admission.verdict import Verdict
from webhook.engine.evaluate import Mode
from webhook.policy.policy_set import PolicySet
from webhook.server.settings import Settings

log = logging.getLogger("webhook")


def create_app(settings: Settings | None = None, policies: PolicySet | None = None) -> Flask:
    """The application. Loads the policies unless given them; a policy set that does not load
    raises PolicyLoadError, so a server never starts on a half-read policy."""
    settings = settings or Settings.from_environ()
    policy_set = policies if policies is not None else PolicySet.load(settings.policy_dir)
    app = Flask("webhook")
    max_body = settings.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]

    def review(mode: Mode) -> tuple[Response, int]:
        if request.mimetype != "application/json":
            return _error(415, "the body must be an AdmissionReview sent as application/json")
        body = _read_body(max_body)
        if body is None:
            return _error(413, f"the body is larger than {max_body // 2**20} MiB")
        try:
            envelope = decode_envelope(body)
        except ReviewDecodeError as error:
            return _error(400, str(error))
        try:
            verdict = decide(read_request(envelope), policy_set, mode)
        except MalformedRequest as error:
            verdict = Verdict.bad_object(str(error))
        except Exception:
            log.exception("unexpected fault while reviewing request %s", envelope.uid)
            verdict = Verdict.errored(
                f"the GPU webhook failed on this request (uid {envelope.uid}); its log has details"
            )
        return jsonify(encode_response(envelope.api_version, envelope.uid, verdict)), 200

    @app.post("/mutate")
    def mutate() -> tuple[Response, int]:
        return review("mutate")

    @app.post("/validate")
    def validate() -> tuple[Response, int]:
        return review("validate")

    @app.get("/healthz")
    def healthz() -> tuple[Response, int]:
        return jsonify(status="ok"), 200

    @app.get("/readyz")
    def readyz() -> tuple[Response, int]:
        names = [policy.name for policy in policy_set.policies]
        return jsonify(status="ready", policies=names), 200

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[Response, int]:
        return _error(error.code or 500, error.description or error.name)

    return app


def _read_body(limit: int) -> bytes | None:
    """The request body, or None when it is over `limit` bytes. A declared length is checked
    before reading; a chunked body is read one byte past the limit and no further."""
    if request.content_length is not None and request.content_length > limit:
        return None
    body = request.stream.read(limit + 1)
    return None if len(body) > limit else body


def _error(code: int, reason: str) -> tuple[Response, int]:
    body: dict[str, Any] = {"error": reason, "code": code}
    return jsonify(body), code
