"""One decoded AdmissionReview judged, as the server's routes and the offline tools both do:
a request of the wrong shape is a denial that says so, and a fault is a denial with code 500
whose message the caller words (the server keeps the traceback in its log)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.admission.decide import decide
from webhook.admission.review import (
    AdmissionRequest,
    MalformedRequest,
    ReviewEnvelope,
    encode_response,
    read_request,
    response_body,
)
from webhook.admission.verdict import Verdict
from webhook.engine.evaluate import Mode
from webhook.engine.inventory import InventorySource
from webhook.policy.namespace_labels import NamespaceLabelSource
from webhook.policy.policy_set import PolicySet

# Called inside the `except` block of an unexpected fault; returns the denial's message.
FaultMessage = Callable[[ReviewEnvelope, Exception], str]


@dataclass(slots=True)
class Admission:
    envelope: ReviewEnvelope
    request: AdmissionRequest | None
    verdict: Verdict

    def answer(self) -> dict[str, Any]:
        """The AdmissionReview sent back."""
        return encode_response(self.envelope.api_version, self.envelope.uid, self.verdict)

    def body(self) -> bytes:
        """The AdmissionReview sent back, as JSON text."""
        return response_body(self.envelope.api_version, self.envelope.uid, self.verdict)


def judge(
    envelope: ReviewEnvelope,
    policies: PolicySet,
    mode: Mode,
    namespace_labels: NamespaceLabelSource,
    fault_message: FaultMessage,
    inventory: InventorySource | None = None,
) -> Admission:
    request: AdmissionRequest | None = None
    try:
        request = read_request(envelope)
        verdict = decide(request, policies, mode, namespace_labels, inventory)
    except MalformedRequest as error:
        verdict = Verdict.bad_object(str(error))
    except Exception as error:
        verdict = Verdict.errored(fault_message(envelope, error))
    return Admission(envelope, request, verdict)
