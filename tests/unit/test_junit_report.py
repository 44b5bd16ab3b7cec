"""The JUnit XML report of `webhook test`, from results made here."""

from pathlib import Path
from xml.etree import ElementTree

from webhook.cli.cases import Expectation, PolicyCase
from webhook.cli.checks import Failure
from webhook.cli.junit import write_junit_report
from webhook.cli.runner import CaseResult
from webhook.policy.namespace_labels import StaticNamespaceLabels


def result(case_id: str, *failures: Failure, seconds: float = 0.25) -> CaseResult:
    case = PolicyCase(
        id=case_id,
        source="gpu-test.yaml:1",
        review={},
        endpoint="mutate",
        policies=Path("policies"),
        namespace_labels=StaticNamespaceLabels(),
        expect=Expectation(allowed=True),
    )
    return CaseResult(case, failures, seconds)


def test_cases_are_grouped_by_suite_in_the_order_they_ran(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    results = [
        result("b-suite/one"),
        result("a-suite/ns/two", Failure("first", ("detail",)), Failure("second")),
        result("b-suite/three/validate"),
    ]
    write_junit_report(results, report)
    root = ElementTree.parse(report).getroot()
    assert root.attrib == {
        "tests": "3",
        "failures": "1",
        "errors": "0",
        "skipped": "0",
        "time": "0.750",
    }
    suites = root.findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [
        ("b-suite", "2", "0"),
        ("a-suite", "1", "1"),
    ]
    assert [c.get("name") for c in suites[0]] == ["one", "three/validate"]
    failure = suites[1].find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == "first"
    assert failure.text == "first\n    detail\n    also: second"


def test_characters_xml_cannot_hold_are_written_as_escapes(tmp_path: Path) -> None:
    """A denial message may carry a control character or a lone surrogate (a JSON escape in a
    review decodes to one); the report must still parse."""
    report = tmp_path / "report.xml"
    reason = "denied: bell \x07, surrogate \ud800, tab \t"
    write_junit_report([result("s/c", Failure(reason))], report)
    failure = ElementTree.parse(report).getroot().find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.get("message") == "denied: bell \\x07, surrogate \\ud800, tab \t"
