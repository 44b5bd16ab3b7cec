"""A policy test case: one AdmissionReview, the policies to answer it with, and what must come
back. Scenario folders and GPUPolicyTest suites both load into these."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook.engine.evaluate import Mode
from webhook.policy.namespace_labels import NamespaceLabelSource


@dataclass(frozen=True)
class Expectation:
    """What the answer must say. `code`, `policy` and `api_version` are checked only when set;
    `mutated` is compared with the patched object only when set."""

    allowed: bool
    code: int | None = None
    message: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    policy: str | None = None
    patched: bool = False
    mutated: Any = None
    mutated_source: str = ""
    api_version: str | None = None


@dataclass(frozen=True)
class PolicyCase:
    """`uses_fallback_policies`: the case names no policy directory of its own and runs against
    the one given by `--policies`."""

    id: str
    source: str
    review: Mapping[str, Any]
    endpoint: Mode
    policies: Path
    namespace_labels: NamespaceLabelSource
    expect: Expectation
    uses_fallback_policies: bool = False
