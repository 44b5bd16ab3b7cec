"""One AdmissionReview answered in this process, the way the server's routes answer it: the same
decoding, the same judgement, the same encoding. Only the transport is left out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from webhook.admission.answer import Admission, judge
from webhook.admission.review import ReviewEnvelope, decode_envelope
from webhook.engine.evaluate import Mode
from webhook.policy.namespace_labels import NamespaceLabelSource
from webhook.policy.policy_set import PolicySet

__all__ = ["Admission", "admit", "review_body"]


def review_body(review: Mapping[str, Any]) -> bytes:
    """`review` as the bytes a server receives; `_http` (what a capture recorded beside the
    body) is not part of it."""
    body = {key: value for key, value in review.items() if key != "_http"}
    return json.dumps(body, separators=(",", ":")).encode()


def _show_fault(envelope: ReviewEnvelope, error: Exception) -> str:
    # The server keeps the traceback in its log; offline, the cause is what the person
    # reviewing needs to see.
    return f"the webhook failed on this request: {error!r}"


def admit(
    body: bytes,
    policies: PolicySet,
    mode: Mode,
    namespace_labels: NamespaceLabelSource,
) -> Admission:
    """The verdict on `body`. Raises ReviewDecodeError when it is not an AdmissionReview (the
    server answers HTTP 400 then)."""
    return judge(decode_envelope(body), policies, mode, namespace_labels, _show_fault)
