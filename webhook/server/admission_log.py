"""What each request to /mutate or /validate came to, as operators count and search it: the
record behind the admission metrics, and the one log line written per admission.

The line names the request (uid, kind, namespace, name, operation) and its verdict, never the
object, the patch or who sent it (userInfo). A denial's message is included: it names the
containers, the GPU resources and the amounts they ask for, which the apiserver shows whoever
sent the object anyway. It can quote the value of an environment variable, but only of one that
a policy sets and enforces for a GPU share, never one the policy does not name.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from webhook.admission.answer import Admission
from webhook.admission.decide import ENFORCEMENT, WOULD_DENY
from webhook.admission.verdict import Verdict
from webhook.engine.evaluate import Mode
from webhook.server.log_lines import LineWriter

# /mutate judges in the mutate mode, /validate in the validate mode.
Endpoint = Mode
VerdictName = Literal["allowed", "patched", "denied", "errored", "bad_request", "warned", "audited"]

log = logging.getLogger("webhook.admission")
# Routed to the error log's streams by the gunicorn configuration (log_lines.py).
admission_lines = LineWriter(log)
# A body that is not a review can make a long reason (it quotes the kind it found).
_REASON_LIMIT = 200


def verdict_name(verdict: Verdict) -> VerdictName:
    if verdict.allowed:
        # Allowed in spite of a broken rule, by a policy in Warn or Audit.
        mode = verdict.audit_annotations.get(ENFORCEMENT)
        if mode is not None:
            return "warned" if mode == "Warn" else "audited"
        return "patched" if verdict.patch else "allowed"
    return "errored" if verdict.code >= 500 else "denied"


@dataclass(slots=True)
class AdmissionRecord:
    endpoint: Endpoint
    uid: str
    group: str
    kind: str
    namespace: str
    name: str
    # Set when the name is not: the apiserver names an object made from generateName only
    # after admission, so this is what tells a ReplicaSet's pods apart in the log.
    generate_name: str
    operation: str
    dry_run: bool
    verdict: VerdictName
    # The governing policy, from the verdict's audit annotation; "" when no policy judged.
    policy: str
    # The GPU model shares were rewritten for, from the audit annotation; "" when none were.
    model: str
    code: int
    message: str
    patch_operations: int
    warnings: int
    seconds: float

    @classmethod
    def of(cls, endpoint: Endpoint, admission: Admission, seconds: float) -> AdmissionRecord:
        request, verdict = admission.request, admission.verdict
        return cls(
            endpoint=endpoint,
            uid=admission.envelope.uid,
            group=request.group if request else "",
            kind=request.kind if request else "",
            namespace=request.namespace if request else "",
            name=request.name if request else "",
            generate_name="" if request is None or request.name else _generate_name(request.object),
            operation=request.operation if request else "",
            dry_run=request.dry_run if request else False,
            verdict=verdict_name(verdict),
            policy=verdict.audit_annotations.get("policy", ""),
            model=verdict.audit_annotations.get("model", ""),
            code=verdict.code,
            # What was denied, or what would have been in Warn and Audit.
            message=verdict.message or verdict.audit_annotations.get(WOULD_DENY, ""),
            patch_operations=len(verdict.patch),
            warnings=len(verdict.warnings),
            seconds=seconds,
        )

    def fields(self) -> dict[str, Any]:
        """The log line's fields, in the order a reader wants them."""
        fields: dict[str, Any] = {
            "uid": self.uid,
            "endpoint": self.endpoint,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        if self.generate_name:
            fields["generateName"] = self.generate_name
        fields |= {
            "operation": self.operation,
            "dryRun": self.dry_run,
            "verdict": self.verdict,
            "policy": self.policy,
        }
        if self.verdict in ("denied", "errored"):
            fields |= {"code": self.code, "denial": self.message}
        elif self.verdict in ("warned", "audited"):
            fields["wouldDeny"] = self.message
        fields |= {
            "patchOperations": self.patch_operations,
            "warnings": self.warnings,
            "durationMs": round(self.seconds * 1000, 3),
        }
        return fields


def log_admission(record: AdmissionRecord) -> None:
    if log.isEnabledFor(logging.INFO):
        admission_lines.info("admission", record.fields())


def log_rejection(endpoint: Endpoint, status: int | None, reason: str) -> None:
    """A body answered with an HTTP error instead of a review (status None: the client closed
    before it could be): no uid, nothing judged."""
    fields = {
        "endpoint": endpoint,
        "verdict": "bad_request",
        "httpStatus": status,
        "error": _clipped(reason),
    }
    admission_lines.info("not an admission review", fields)


def log_client_fault(path: str, status: int | None, reason: str) -> None:
    """A request to a path other than a review's that the front refused, or whose client went
    away before it arrived whole."""
    fields = {"path": _clipped(path), "httpStatus": status, "error": _clipped(reason)}
    admission_lines.info("client fault", fields)


def _clipped(text: str) -> str:
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 3] + "..."


def _generate_name(obj: Any) -> str:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    value = metadata.get("generateName") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) else ""
