"""The answer to one admission request, before it is encoded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    patch: Sequence[Mapping[str, Any]] = ()
    warnings: Sequence[str] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def allow(cls, *, warnings: Sequence[str] = (), audit: Mapping[str, str] = _EMPTY) -> Verdict:
        return cls(True, warnings=tuple(warnings), audit_annotations=audit)

    @classmethod
    def patched(
        cls,
        patch: Sequence[Mapping[str, Any]],
        *,
        warnings: Sequence[str] = (),
        audit: Mapping[str, str] = _EMPTY,
    ) -> Verdict:
        return cls(True, patch=tuple(patch), warnings=tuple(warnings), audit_annotations=audit)

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
