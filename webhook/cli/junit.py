"""The results of `webhook test` as a JUnit XML report, the form CI systems (GitLab, Jenkins,
GitHub's test reporters) read: one testsuite per suite or group of scenario folders, one
testcase per case, and a failure with the reasons of each failed one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree

from webhook.cli.case_reports import failure_lines
from webhook.cli.errors import InputError
from webhook.cli.runner import CaseResult

# What XML 1.0 cannot hold, even escaped: most control characters, lone surrogates (a JSON
# escape in a review decodes to one), U+FFFE and U+FFFF. They are written as Python escapes.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def junit_report(results: Sequence[CaseResult]) -> ElementTree.ElementTree:
    by_suite: dict[str, list[CaseResult]] = {}
    for result in results:
        by_suite.setdefault(result.suite, []).append(result)
    root = ElementTree.Element("testsuites", _counts(results))
    for suite, members in by_suite.items():
        element = ElementTree.SubElement(
            root, "testsuite", {"name": _xml_text(suite), **_counts(members)}
        )
        for result in members:
            testcase = ElementTree.SubElement(
                element,
                "testcase",
                {
                    "classname": _xml_text(suite),
                    "name": _xml_text(result.name),
                    "time": _seconds(result.seconds),
                },
            )
            if not result.passed:
                failure = ElementTree.SubElement(
                    testcase, "failure", {"message": _xml_text(result.failures[0].reason)}
                )
                failure.text = _xml_text("\n".join(failure_lines(result)))
    tree = ElementTree.ElementTree(root)
    ElementTree.indent(tree)
    return tree


def write_junit_report(results: Sequence[CaseResult], path: Path) -> None:
    try:
        junit_report(results).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as error:
        raise InputError(f"{path}: cannot write the JUnit report: {error.strerror}") from None


def check_report_path(path: Path) -> None:
    """Refuses, before any case runs, a report path that cannot be written."""
    if path.is_dir():
        raise InputError(f"{path}: is a directory; --junit names the report file")
    if not path.parent.is_dir():
        raise InputError(f"{path}: no directory {path.parent} to write the JUnit report in")


def _counts(results: Sequence[CaseResult]) -> dict[str, str]:
    return {
        "tests": str(len(results)),
        "failures": str(sum(not result.passed for result in results)),
        "errors": "0",
        "skipped": "0",
        "time": _seconds(sum(result.seconds for result in results)),
    }


def _seconds(seconds: float) -> str:
    return f"{seconds:.3f}"


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda found: found[0].encode("unicode_escape").decode("ascii"), text)
