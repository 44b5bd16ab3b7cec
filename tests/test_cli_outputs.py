"""`lint` of one policy file, and the reports of `test` that CI reads: `-o json` and `--junit`.

The command line runs in this process, through `main`, as in tests/test_cli.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.support.cli_runs import webhook

REPO_ROOT = Path(__file__).resolve().parents[1]
WRONG_EXPECTATIONS = "tests/cli_fixtures/wrong-expectations"
HEADER = "apiVersion: gpu-admission.example.com/v1alpha1\nkind: GPUPolicy\n"
SHARED_POOL = (
    HEADER + "metadata: {name: team}\n"
    "spec:\n"
    "  sharing:\n"
    "    vramResource: example.com/vram\n"
    "    models: [Tesla-T4]\n"
    "    nodes:\n"
    "      multiGPU: Sum\n"
)
CATALOGUE = (
    "apiVersion: gpu-admission.example.com/v1alpha1\n"
    "kind: GPUModelCatalogue\n"
    "metadata: {name: lab-cards}\n"
    "spec:\n"
    "  models: [{product: Lab-Card-9000, memoryMiB: 20480}]\n"
)
LAB_POOL = (
    HEADER + "metadata: {name: lab}\n"
    "spec:\n"
    "  sharing: {vramResource: example.com/vram, models: [Lab-Card-9000]}\n"
)


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)


# lint FILE


def test_lint_of_one_file_says_its_policies_are_ok() -> None:
    run = webhook("lint", "policies/default.yaml")
    assert run.code == 0, run.out + run.err
    assert run.out.splitlines()[0] == "policies/default.yaml: 1 policy OK: default"


def test_lint_of_one_file_leaves_its_siblings_out(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        HEADER + "metadata: {name: team-a}\nspec:\n  match: {namespaces: [ml-*]}\n"
    )
    (tmp_path / "b.yaml").write_text(
        HEADER + "metadata: {name: team-b}\nspec:\n  match: {namespaces: [ml-vision]}\n"
    )
    assert webhook("lint", str(tmp_path)).code == 1  # the two overlap
    alone = webhook("lint", str(tmp_path / "b.yaml"))
    assert alone.code == 0, alone.out
    assert alone.out == f"{tmp_path}/b.yaml: 1 policy OK: team-b\n"


def test_lint_of_one_file_names_its_problems_by_the_path_given(tmp_path: Path) -> None:
    twice = HEADER + "metadata: {name: team}\nspec: {match: {namespaces: [ml]}}\n"
    file = tmp_path / "team.yaml"
    file.write_text(twice + "---\n" + twice)
    run = webhook("lint", str(file))
    assert run.code == 1
    assert run.out.splitlines() == [
        f"{file}: metadata.name: policy 'team' is already defined in {file}",
        f"{file}: 1 problem",
    ]


def test_lint_of_one_file_reads_the_catalogue_in_it_else_the_built_in_one(
    tmp_path: Path,
) -> None:
    with_catalogue = tmp_path / "with-catalogue.yaml"
    with_catalogue.write_text(CATALOGUE + "---\n" + LAB_POOL)
    assert webhook("lint", str(with_catalogue)).code == 0
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "catalogue.yaml").write_text(CATALOGUE)
    without = directory / "lab.yaml"
    without.write_text(LAB_POOL)
    # Beside it in the directory, the catalogue serves; linted alone, the file has none.
    assert webhook("lint", str(directory)).code == 0
    run = webhook("lint", str(without))
    assert run.code == 1
    assert "'Lab-Card-9000' is not in the GPU model catalogue" in run.out


def test_lint_of_a_file_without_policies_says_so(tmp_path: Path) -> None:
    file = tmp_path / "empty.yaml"
    file.write_text("# nothing here yet\n")
    run = webhook("lint", str(file))
    assert run.code == 1
    assert run.out.splitlines() == [
        f"{file}: (file): holds no policy documents",
        f"{file}: 1 problem",
    ]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no/such/policy.yaml", "no/such/policy.yaml: no such file or directory"),
        ("README.md", "README.md: not a policy file (.yaml, .yml, .json)"),
    ],
    ids=["missing", "not-a-policy-file"],
)
def test_lint_of_a_path_it_cannot_read_is_an_input_error(path: str, message: str) -> None:
    run = webhook("lint", path)
    assert run.code == 2
    assert run.out == ""
    assert run.err == f"python -m webhook lint: {message}\n"


# lint: values YAML read as other than the string written


def test_lint_says_how_yaml_read_multi_gpu_yes(tmp_path: Path) -> None:
    file = tmp_path / "team.yaml"
    file.write_text(SHARED_POOL.replace("multiGPU: Sum", "multiGPU: Yes"))
    run = webhook("lint", str(file))
    assert run.code == 1
    assert run.out.splitlines()[0] == (
        f"{file}:9: spec.sharing.nodes.multiGPU: Yes is read by YAML as the boolean true, "
        """not the string "Yes": write one of 'Skip', 'Sum'"""
    )
    assert "True" not in run.out


def test_lint_says_to_quote_a_product_name_yaml_read_as_a_number(tmp_path: Path) -> None:
    file = tmp_path / "team.yaml"
    file.write_text(SHARED_POOL.replace("models: [Tesla-T4]", "models: [1080]"))
    run = webhook("lint", str(file))
    assert run.code == 1
    assert run.out.splitlines()[0] == (
        f"{file}:7: spec.sharing.models[0]: 1080 is read by YAML as the integer 1080, "
        'not the string "1080": quote it ("1080")'
    )


def test_a_suite_gets_the_same_words_for_a_label_yaml_read_as_a_boolean(tmp_path: Path) -> None:
    (tmp_path / "pods.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"
        "spec: {containers: [{name: web, image: nginx}]}\n"
    )
    (tmp_path / "gpu-test.yaml").write_text(
        "apiVersion: gpu-admission.example.com/v1alpha1\n"
        "kind: GPUPolicyTest\n"
        "metadata: {name: t}\n"
        f"policies: {REPO_ROOT / 'policies'}\n"
        "resources: [pods.yaml]\n"
        "namespaces: {ml: {gpu-sharing: on}}\n"
        "results: [{resource: web, allowed: true}]\n"
    )
    run = webhook("test", str(tmp_path))
    assert run.code == 2
    assert (
        "gpu-test.yaml:6: namespaces.ml.gpu-sharing: on is read by YAML as the boolean true, "
        'not the string "on": quote it ("on")'
    ) in run.err


# test -o json


def test_json_output_lists_every_case_and_the_totals() -> None:
    as_text = webhook("test", WRONG_EXPECTATIONS)
    run = webhook("test", WRONG_EXPECTATIONS, "-o", "json")
    assert (run.code, as_text.code) == (1, 1)
    assert run.err == ""
    report = json.loads(run.out)
    assert report["totals"] == {"cases": 5, "passed": 1, "failed": 4}
    ran = re.findall(r"^(PASS|FAIL) ([^:\s]+)", as_text.out, re.MULTILINE)
    assert [(case["id"], case["passed"]) for case in report["cases"]] == [
        (case_id, verdict == "PASS") for verdict, case_id in ran
    ]
    by_id = {case["id"]: case for case in report["cases"]}
    denied = by_id["wrong-expectations/frac-quarter"]
    assert (denied["suite"], denied["name"]) == ("wrong-expectations", "frac-quarter")
    assert denied["source"] == f"{WRONG_EXPECTATIONS}/gpu-test.yaml:11"
    assert denied["failures"] == [
        {"reason": "expected a denial, but it was allowed", "details": []}
    ]
    differs = by_id["wrong-expectations/ml/frac-quarter"]["failures"][0]
    assert differs["reason"].startswith("the patched object differs")
    assert "-          example.com/vram: '4096'" in differs["details"]
    assert by_id["wrong-expectations/web/plain-web"] == {
        "id": "wrong-expectations/web/plain-web",
        "suite": "wrong-expectations",
        "name": "web/plain-web",
        "source": f"{WRONG_EXPECTATIONS}/gpu-test.yaml:29",
        "passed": True,
        "failures": [],
    }


def test_json_output_of_passing_cases_exits_0() -> None:
    run = webhook("test", "examples/policy-tests", "-o", "json")
    assert run.code == 0, run.out + run.err
    report = json.loads(run.out)
    assert report["totals"]["failed"] == 0
    assert report["totals"]["cases"] == report["totals"]["passed"] == len(report["cases"]) >= 7


def test_json_output_of_a_suite_that_does_not_load_is_empty_and_exits_2() -> None:
    run = webhook("test", "tests/cli_fixtures/bad-suite", "-o", "json")
    assert run.code == 2
    assert run.out == ""
    assert "results[0].allowd: unknown field" in run.err


# test --junit


def junit(path: Path) -> ElementTree.Element:
    root = ElementTree.parse(path).getroot()
    assert root.tag == "testsuites"
    return root


def test_the_documented_ci_run_writes_a_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    run = webhook("test", "examples/policies", "--junit", str(report))
    assert run.code == 0, run.out + run.err
    passed = int(run.out.splitlines()[-1].split()[0])
    root = junit(report)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (str(passed), "0", "0")
    assert len(root.findall("testsuite/testcase")) == passed
    suites = {suite.get("name") for suite in root.findall("testsuite")}
    assert {"hami", "mig", "kai", "time-slicing"} <= suites
    quarter = root.find("testsuite[@name='hami']/testcase[@name='quarter-gpu']")
    assert quarter is not None and quarter.get("classname") == "hami"
    assert float(quarter.get("time", "-1")) >= 0


def test_a_junit_report_names_each_failure_and_the_text_goes_on(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    as_text = webhook("test", "examples/policy-tests", WRONG_EXPECTATIONS)
    run = webhook("test", "examples/policy-tests", WRONG_EXPECTATIONS, "--junit", str(report))
    assert run.code == as_text.code == 1
    assert run.out == as_text.out
    root = junit(report)
    assert (root.get("tests"), root.get("failures")) == ("12", "4")
    wrong = root.find("testsuite[@name='wrong-expectations']")
    shipped = root.find("testsuite[@name='shipped-policies']")
    assert wrong is not None and shipped is not None
    assert (wrong.get("tests"), wrong.get("failures")) == ("5", "4")
    assert (shipped.get("tests"), shipped.get("failures")) == ("7", "0")
    failures = {
        f"{case.get('classname')}/{case.get('name')}": case.find("failure")
        for case in root.iter("testcase")
    }
    fail_lines = [line for line in run.out.splitlines() if line.startswith("FAIL ")]
    assert len(fail_lines) == sum(failure is not None for failure in failures.values()) == 4
    for line in fail_lines:
        case_id, reason = line.removeprefix("FAIL ").split(": ", 1)
        failure = failures[case_id]
        assert failure is not None and failure.get("message") == reason
        assert failure.text is not None and failure.text.startswith(reason)
    differs = failures["wrong-expectations/ml/frac-quarter"]
    assert differs is not None and "+          example.com/vram: '3840'" in (differs.text or "")


def test_json_and_junit_together(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    run = webhook("test", WRONG_EXPECTATIONS, "-o", "json", "--junit", str(report))
    assert run.code == 1
    assert json.loads(run.out)["totals"]["failed"] == 4
    assert junit(report).get("failures") == "4"


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing/report.xml", "no directory"),
        (".", "is a directory; --junit names the report file"),
    ],
    ids=["no-such-directory", "a-directory"],
)
def test_a_junit_report_that_cannot_be_written_stops_the_run_first(
    where: str, message: str
) -> None:
    run = webhook("test", "examples/policy-tests", "--junit", where)
    assert run.code == 2
    assert run.out == ""
    assert message in run.err
