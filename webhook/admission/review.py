"""AdmissionReview in and out (admission.k8s.io/v1, and v1beta1 answered in kind).

Two kinds of bad input, kept apart: a body that is not an AdmissionReview at all is a
`ReviewDecodeError` (the route answers HTTP 400); a review with a usable uid but a request
of the wrong shape is a `MalformedRequest`, answered in-band as a denial.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from json.encoder import encode_basestring_ascii
from typing import Any, cast

from webhook.admission.input_bounds import MAX_NESTING_DEPTH, nested_too_deeply
from webhook.admission.verdict import Verdict

SUPPORTED_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
# encode_response's layout, compact, with the members after the uid left to the verdict.
_BODY = '{"apiVersion":%s,"kind":"AdmissionReview","response":{"uid":%s,%s}}'


class ReviewDecodeError(ValueError):
    """The body is not an AdmissionReview we can answer."""


class MalformedRequest(ValueError):
    """The review has a uid, but its request cannot be read."""


# Made for every request: slots rather than frozen, whose __init__ costs five times as much.
@dataclass(slots=True)
class ReviewEnvelope:
    api_version: str
    uid: str
    request: dict[str, Any]
    # Deeper than input_bounds allows: answered with a denial that says so, never read.
    too_deep: bool = False
    # A JSON number no float holds as it was written (1E-400, 1e400, 0.30000000000000004441):
    # the apiserver reads a bare number by its text, so it is refused rather than misread.
    inexact_number: str | None = None


@dataclass(slots=True)
class AdmissionRequest:
    uid: str
    group: str
    version: str
    kind: str
    operation: str
    sub_resource: str
    namespace: str
    name: str
    object: Any
    old_object: Any
    dry_run: bool


class _InexactNumber(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _float_as_sent(text: str) -> float:
    value = float(text)
    if not _exact(text, value):
        raise _InexactNumber(text)
    return value


# One decoder for every body: json.loads with a parse_float builds a decoder each call.
_DECODER = json.JSONDecoder(parse_float=_float_as_sent)


def _decoded(body: bytes) -> tuple[Any, str | None]:
    """The body's JSON, and the first number in it that no float holds as written (decoded
    again as floats then, so that the review is still answered, in-band)."""
    try:
        return _DECODER.decode(body.decode(json.detect_encoding(body), "surrogatepass")), None
    except _InexactNumber as number:
        return json.loads(body), number.text


def decode_envelope(body: bytes) -> ReviewEnvelope:
    try:
        review, inexact = _decoded(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise ReviewDecodeError(f"the body is not JSON: {error}") from None
    except RecursionError:
        raise ReviewDecodeError("the body is nested too deeply") from None
    if not isinstance(review, dict):
        raise ReviewDecodeError("the body is not a JSON object")
    if review.get("kind") != "AdmissionReview":
        raise ReviewDecodeError(f"kind is {review.get('kind')!r}, not 'AdmissionReview'")
    api_version = review.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        supported = ", ".join(SUPPORTED_API_VERSIONS)
        raise ReviewDecodeError(f"apiVersion {api_version!r} is not one of {supported}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewDecodeError("the review has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewDecodeError("request.uid is missing or not a string")
    too_deep = nested_too_deeply(body, request)
    return ReviewEnvelope(api_version, uid, request, too_deep, inexact)


def _exact(text: str, value: float) -> bool:
    """Whether the float's shortest text is the number that was written (0.1 is; 1E-400 is
    not: a float makes 0.0 of it)."""
    return math.isfinite(value) and Decimal(repr(value)) == Decimal(text)


def read_request(envelope: ReviewEnvelope) -> AdmissionRequest:
    if envelope.too_deep:
        raise MalformedRequest(
            f"the request nests objects and arrays more than {MAX_NESTING_DEPTH} levels deep; "
            "no Kubernetes object does"
        )
    if envelope.inexact_number is not None:
        number = envelope.inexact_number[:40]
        raise MalformedRequest(
            f"the request holds the number {number}, which cannot be read exactly as sent; "
            f'write a quantity as a string ("{number}"), as the apiserver sends it'
        )
    raw = envelope.request
    kind = raw.get("kind")
    if type(kind) is not dict:
        return _checked_request(envelope)
    # What the apiserver sends: every field a string, the optional ones perhaps absent.
    # Anything else is read again field by field, for a message that names the field.
    texts = cast(
        # Strings, or the join below refuses them.
        tuple[str, str, str, str, str, str, str],
        (
            kind.get("group", ""),
            kind.get("version", ""),
            kind.get("kind"),
            raw.get("operation"),
            raw.get("subResource", ""),
            raw.get("namespace", ""),
            raw.get("name", ""),
        ),
    )
    try:
        "".join(texts)  # takes strings only: quicker than testing each type
    except TypeError:
        return _checked_request(envelope)
    if not texts[2] or not texts[3]:
        return _checked_request(envelope)
    return AdmissionRequest(
        envelope.uid, *texts, raw.get("object"), raw.get("oldObject"), raw.get("dryRun") is True
    )


def _checked_request(envelope: ReviewEnvelope) -> AdmissionRequest:
    raw = envelope.request
    kind = raw.get("kind")
    if not isinstance(kind, dict):
        raise MalformedRequest("request.kind must be an object with group, version and kind")
    return AdmissionRequest(
        uid=envelope.uid,
        group=_string(kind, "group", "request.kind"),
        version=_string(kind, "version", "request.kind"),
        kind=_string(kind, "kind", "request.kind", required=True),
        operation=_string(raw, "operation", "request", required=True),
        sub_resource=_string(raw, "subResource", "request"),
        namespace=_string(raw, "namespace", "request"),
        name=_string(raw, "name", "request"),
        object=raw.get("object"),
        old_object=raw.get("oldObject"),
        dry_run=raw.get("dryRun") is True,
    )


def _string(node: dict[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = node.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise MalformedRequest(f"{where}.{key} must be a non-empty string")
    return value


def encode_response(envelope_api_version: str, uid: str, verdict: Verdict) -> dict[str, Any]:
    response = {"uid": uid, **verdict.response_members()}
    return {"apiVersion": envelope_api_version, "kind": "AdmissionReview", "response": response}


def response_body(envelope_api_version: str, uid: str, verdict: Verdict) -> bytes:
    """encode_response as the JSON text sent back. All that follows the uid is the verdict's,
    encoded once however many requests it answers."""
    api_version = encode_basestring_ascii(envelope_api_version)
    return (_BODY % (api_version, encode_basestring_ascii(uid), verdict.members_json())).encode()
