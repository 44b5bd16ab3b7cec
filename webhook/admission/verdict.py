"""The answer to one admission request, before it is encoded."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from webhook.engine.patch import JsonPatch

_EMPTY: Mapping[str, str] = MappingProxyType({})
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


# Made for every request: slots rather than frozen, whose __init__ costs five times as much.
@dataclass(slots=True)
class Verdict:
    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    patch: Sequence[Mapping[str, Any]] = ()
    warnings: Sequence[str] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    # Objects the admitted object needs in its namespace (ResourceClaimTemplates), which the
    # server makes before it answers: never part of the answer itself.
    companions: Sequence[Mapping[str, Any]] = ()
    _members_json: str | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def allow(
        cls,
        *,
        warnings: Sequence[str] = (),
        audit: Mapping[str, str] = _EMPTY,
        companions: Sequence[Mapping[str, Any]] = (),
    ) -> Verdict:
        if not warnings and not audit and not companions:
            return _ALLOWED
        return cls(True, warnings=tuple(warnings), audit_annotations=audit, companions=companions)

    @classmethod
    def patched(
        cls,
        patch: Sequence[Mapping[str, Any]],
        *,
        warnings: Sequence[str] = (),
        audit: Mapping[str, str] = _EMPTY,
        companions: Sequence[Mapping[str, Any]] = (),
    ) -> Verdict:
        return cls(
            True,
            patch=JsonPatch.of(patch),
            warnings=tuple(warnings),
            audit_annotations=audit,
            companions=companions,
        )

    @classmethod
    def deny(
        cls,
        message: str,
        *,
        code: int = 403,
        reason: str = "Forbidden",
        warnings: Sequence[str] = (),
        audit: Mapping[str, str] = _EMPTY,
    ) -> Verdict:
        return cls(
            False,
            code=code,
            reason=reason,
            message=message,
            warnings=tuple(warnings),
            audit_annotations=audit,
        )

    @classmethod
    def bad_object(cls, message: str) -> Verdict:
        return cls.deny(message, code=400, reason="BadRequest")

    @classmethod
    def errored(cls, message: str) -> Verdict:
        return cls.deny(message, code=500, reason="InternalError")

    def response_members(self) -> dict[str, Any]:
        """The members of the AdmissionReview response that follow its uid."""
        members: dict[str, Any] = {"allowed": self.allowed}
        if not self.allowed:
            members["status"] = {
                "status": "Failure",
                "code": self.code,
                "reason": self.reason,
                "message": self.message,
            }
        if self.patch:
            members["patchType"] = "JSONPatch"
            members["patch"] = JsonPatch.of(self.patch).base64
        if self.warnings:
            members["warnings"] = list(self.warnings)
        if self.audit_annotations:
            members["auditAnnotations"] = dict(self.audit_annotations)
        return members

    def members_json(self) -> str:
        """response_members as compact JSON without its braces, kept: a verdict reused for
        many requests is encoded once."""
        if self._members_json is None:
            self._members_json = _ENCODE(self.response_members())[1:-1]
        return self._members_json


# The answer to most requests, shared.
_ALLOWED = Verdict(True)
