"""`webhook test`: run the policy test suites and scenario folders under some paths.

Everything is loaded first, so a suite that does not parse or a policy directory that does not
load stops the run (exit 2) before any case runs; then every case runs and gets one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from webhook.cli.cases import PolicyCase
from webhook.cli.discovery import FoundTest, discover
from webhook.cli.errors import InputError
from webhook.cli.policies import load_policy_set
from webhook.cli.runner import CaseResult, run_case
from webhook.cli.scenario_folders import load_scenario
from webhook.cli.suite_files import load_suite_file
from webhook.policy.policy_set import PolicySet

DETAIL_INDENT = "    "


def run_tests(paths: Sequence[Path], fallback_policies: Path, *, stdout: TextIO) -> int:
    """0 when every case passes, 1 when one fails."""
    cases = load_cases(paths, fallback_policies)
    policy_sets = _policy_sets(cases)
    failed = 0
    for case in cases:
        result = run_case(case, policy_sets[case.policies])
        failed += not result.passed
        stdout.write(_report(result))
        stdout.flush()
    stdout.write(f"{len(cases) - failed} passed, {failed} failed\n")
    return 1 if failed else 0


def load_cases(paths: Sequence[Path], fallback_policies: Path) -> list[PolicyCase]:
    """Every case under `paths`; InputError with the problems of every source that fails."""
    found: list[FoundTest] = []
    problems: list[str] = []
    for path in paths:
        try:
            found.extend(discover(path))
        except InputError as error:
            problems.extend(error.lines)
    cases: list[PolicyCase] = []
    for test in found:
        try:
            if test.form == "suite":
                cases.extend(load_suite_file(test.path))
            else:
                cases.append(load_scenario(test.path, test.root, fallback_policies))
        except InputError as error:
            problems.extend(error.lines)
    if problems:
        raise InputError(problems)
    return cases


def _policy_sets(cases: Sequence[PolicyCase]) -> dict[Path, PolicySet]:
    users: dict[Path, PolicyCase] = {}
    for case in cases:
        known = users.get(case.policies)
        if known is None or (case.uses_fallback_policies and not known.uses_fallback_policies):
            users[case.policies] = case
    loaded: dict[Path, PolicySet] = {}
    problems: list[str] = []
    for directory, case in users.items():
        used_by = case.source
        if case.uses_fallback_policies:
            used_by += ", which has no policies/ folder above it; --policies names another"
        try:
            loaded[directory] = load_policy_set(directory, used_by=used_by)
        except InputError as error:
            problems.extend(error.lines)
    if problems:
        raise InputError(problems)
    return loaded


def _report(result: CaseResult) -> str:
    if result.passed:
        return f"PASS {result.case.id}\n"
    first, *others = result.failures
    lines = [f"FAIL {result.case.id}: {first.reason}"]
    lines.extend(DETAIL_INDENT + detail for detail in first.details)
    for failure in others:
        lines.append(f"{DETAIL_INDENT}also: {failure.reason}")
        lines.extend(DETAIL_INDENT + detail for detail in failure.details)
    return "\n".join(lines) + "\n"
