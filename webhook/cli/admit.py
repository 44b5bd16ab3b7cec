"""One AdmissionReview answered in this process, the way the server's routes answer it: the same
decoding, the same decision, the same encoding. Only the transport is left out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.admission.decide import decide
from webhook.admission.review import (
    AdmissionRequest,
    MalformedRequest,
    ReviewEnvelope,
    decode_envelope,
    encode_response,
    read_request,
)
from webhook.admission.verdict import Verdict
from webhook.engine.evaluate import Mode
from webhook.policy.namespace_labels import NamespaceLabelSource
from webhook.policy.policy_set import PolicySet


@dataclass(frozen=True)
class Admission:
    envelope: ReviewEnvelope
    request: AdmissionRequest | None
    verdict: Verdict

    def answer(self) -> dict[str, Any]:
        """The AdmissionReview the server would send back."""
        return encode_response(self.envelope.api_version, self.envelope.uid, self.verdict)


def review_body(review: Mapping[str, Any]) -> bytes:
    """`review` as the bytes a server receives; `_http` (what a capture recorded beside the
    body) is not part of it."""
    body = {key: value for key, value in review.items() if key != "_http"}
    return json.dumps(body, separators=(",", ":")).encode()


def admit(
    body: bytes,
    policies: PolicySet,
    mode: Mode,
    namespace_labels: NamespaceLabelSource,
) -> Admission:
    """The verdict on `body`. Raises ReviewDecodeError when it is not an AdmissionReview (the
    server answers HTTP 400 then)."""
    envelope = decode_envelope(body)
    request: AdmissionRequest | None = None
    try:
        request = read_request(envelope)
        verdict = decide(request, policies, mode, namespace_labels=namespace_labels)
    except MalformedRequest as error:
        verdict = Verdict.bad_object(str(error))
    except Exception as error:
        # The server answers a fault with code 500 and keeps the traceback in its log; offline,
        # the cause is what the person reviewing needs to see.
        verdict = Verdict.errored(f"the webhook failed on this request: {error!r}")
    return Admission(envelope, request, verdict)
