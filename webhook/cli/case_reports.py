"""The results of `webhook test`, written for people (a line per case) or for machines (one
JSON document)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.cli.render import dump
from webhook.cli.runner import CaseResult

DETAIL_INDENT = "    "


def failure_lines(result: CaseResult) -> list[str]:
    """Why a case failed: the first reason, then the others after `also:`, each followed by its
    details, indented."""
    lines: list[str] = []
    for position, failure in enumerate(result.failures):
        lines.append(failure.reason if position == 0 else f"{DETAIL_INDENT}also: {failure.reason}")
        lines.extend(DETAIL_INDENT + detail for detail in failure.details)
    return lines


def case_text(result: CaseResult) -> str:
    """`PASS id`, or `FAIL id: reason` and the lines that follow it."""
    if result.passed:
        return f"PASS {result.case.id}\n"
    first, *others = failure_lines(result)
    return "\n".join([f"FAIL {result.case.id}: {first}", *others]) + "\n"


def summary_text(results: Sequence[CaseResult]) -> str:
    failed = sum(not result.passed for result in results)
    return f"{len(results) - failed} passed, {failed} failed\n"


def json_text(results: Sequence[CaseResult]) -> str:
    """Every case, in the order it ran, and the totals."""
    failed = sum(not result.passed for result in results)
    document: dict[str, Any] = {
        "cases": [
            {
                "id": result.case.id,
                "suite": result.suite,
                "name": result.name,
                "source": result.case.source,
                "passed": result.passed,
                "failures": [
                    {"reason": failure.reason, "details": list(failure.details)}
                    for failure in result.failures
                ],
            }
            for result in results
        ],
        "totals": {"cases": len(results), "passed": len(results) - failed, "failed": failed},
    }
    return dump(document, "json")
