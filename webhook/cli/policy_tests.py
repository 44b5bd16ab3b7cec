"""`webhook test`: run the policy test suites and scenario folders under some paths.

Everything is loaded first, so a suite that does not parse or a policy directory that does not
load stops the run (exit 2) before any case runs; then every case runs and gets one line, or,
with `-o json`, one document at the end. A JUnit report, when asked for, is written as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, TextIO

from webhook.cli.case_reports import case_text, json_text, summary_text
from webhook.cli.cases import PolicyCase
from webhook.cli.discovery import FoundTest, discover
from webhook.cli.errors import InputError
from webhook.cli.junit import check_report_path, write_junit_report
from webhook.cli.policies import load_policy_set
from webhook.cli.runner import CaseResult, run_case
from webhook.cli.scenario_folders import load_scenario
from webhook.cli.suite_files import load_suite_file
from webhook.policy.policy_set import PolicySet

Output = Literal["text", "json"]


def run_tests(
    paths: Sequence[Path],
    fallback_policies: Path,
    *,
    stdout: TextIO,
    output: Output = "text",
    junit: Path | None = None,
) -> int:
    """0 when every case passes, 1 when one fails. `junit`: where to write a JUnit report."""
    if junit is not None:
        check_report_path(junit)
    cases = load_cases(paths, fallback_policies)
    policy_sets = _policy_sets(cases)
    results: list[CaseResult] = []
    for case in cases:
        results.append(run_case(case, policy_sets[case.policies]))
        if output == "text":
            stdout.write(case_text(results[-1]))
            stdout.flush()
    stdout.write(json_text(results) if output == "json" else summary_text(results))
    if junit is not None:
        write_junit_report(results, junit)
    return 0 if all(result.passed for result in results) else 1


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
