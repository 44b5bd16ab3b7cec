"""Running policy test cases in this process, against the policies each names."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cli.admit import admit, review_body
from webhook.cli.cases import PolicyCase
from webhook.cli.checks import Failure, check_case
from webhook.engine.evaluate import Mode
from webhook.policy.policy_set import PolicySet


@dataclass(frozen=True)
class CaseResult:
    case: PolicyCase
    failures: tuple[Failure, ...]
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def suite(self) -> str:
        """The suite, or the group of scenario folders, the case belongs to: its id up to the
        first '/' (a suite's name and a folder's hold none)."""
        return self.case.id.partition("/")[0]

    @property
    def name(self) -> str:
        """The case's id within its suite."""
        return self.case.id.partition("/")[2]


def run_case(case: PolicyCase, policies: PolicySet) -> CaseResult:
    def post(endpoint: Mode, review: Mapping[str, Any]) -> Mapping[str, Any]:
        return admit(review_body(review), policies, endpoint, case.namespace_labels).answer()

    started = time.perf_counter()
    try:
        failures = check_case(case.review, case.endpoint, case.expect, post)
    except Exception as error:
        # One case that breaks the checks must not hide the results of the others.
        failures = [Failure(f"the case could not be checked: {error!r}")]
    return CaseResult(case, tuple(failures), time.perf_counter() - started)
