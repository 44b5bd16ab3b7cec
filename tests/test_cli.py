"""The offline tools: `python -m webhook lint`, `review` and `test`.

The suites in tests/scenarios and examples/policy-tests run through `python -m webhook test`
as a subprocess, as CI runs them; the rest call the command line in this process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.cli_runs import Run, webhook
from webhook import __version__

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path("tests/cli_fixtures")
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.MULTILINE)
QUARTER_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: frac-quarter, labels: {app: infer}}
spec:
  containers:
  - name: infer
    image: nvcr.io/nvidia/pytorch:24.01-py3
    resources: {limits: {nvidia.com/gpu: "0.25", memory: 8Gi}}
"""


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)


def webhook_process(*args: str) -> Run:
    done = subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def summary(run: Run) -> tuple[int, int]:
    found = SUMMARY.findall(run.out)
    assert len(found) == 1, run.out
    assert run.out.splitlines()[-1] == f"{found[0][0]} passed, {found[0][1]} failed"
    return int(found[0][0]), int(found[0][1])


def objects(text: str) -> list[dict[str, object]]:
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


# test: the repository's own fixtures and the shipped examples


def test_scenario_folders_pass_through_the_test_command() -> None:
    run = webhook_process("test", "tests/scenarios")
    folders = {
        path.parent
        for pattern in ("*/*/review.json", "*/*/resource.yaml")
        for path in (REPO_ROOT / "tests/scenarios").glob(pattern)
    }
    assert run.code == 0, run.out + run.err
    assert summary(run) == (len(folders), 0)
    assert "PASS shipped/01-create-pod-frac-quarter" in run.out.splitlines()
    assert "PASS strict/enforced-env-differs" in run.out.splitlines()


def test_cookbook_suites_pass() -> None:
    run = webhook_process("test", "examples/cookbook")
    assert run.code == 0, run.out + run.err
    lines = run.out.splitlines()
    for recipe in ("one-model", "mixed-models", "opt-in-by-label", "production-whole-only"):
        assert any(line.startswith(f"PASS {recipe}/") for line in lines), (recipe, lines)
    assert summary(run)[0] >= 13


def test_the_pool_per_backend_example_passes_and_lints_clean() -> None:
    run = webhook_process("test", "examples/pools")
    assert run.code == 0, run.out + run.err
    assert "PASS pools/team-a/quarter-of-an-h200" in run.out.splitlines()
    linted = webhook("lint", "examples/pools")
    assert linted.code == 0 and "2 policies OK: a100-mig, h200-hami" in linted.out


def test_backend_example_suites_pass() -> None:
    run = webhook_process("test", "examples/policies")
    assert run.code == 0, run.out + run.err
    lines = run.out.splitlines()
    for backend in ("extended-resource", "gpushare", "hami", "time-slicing", "mig", "kai"):
        assert f"PASS {backend}/quarter-gpu" in lines, (backend, lines)
        assert f"PASS {backend}/quarter-gpu/validate" in lines, (backend, lines)
    assert summary(run)[0] >= 50


def test_example_suites_pass() -> None:
    run = webhook_process("test", "examples/policy-tests")
    assert run.code == 0, run.out + run.err
    passed, _ = summary(run)
    assert passed >= 7
    for case in (
        "frac-quarter",
        "frac-quarter/validate",
        "whole-two",
        "bad-req-ne-lim",
        "fraction-above-one",
        "llm-serve",
        "plain-web",
    ):
        assert f"PASS shipped-policies/{case}" in run.out.splitlines()


def test_suites_with_namespace_labels_and_scenarios_from_manifests_pass() -> None:
    run = webhook("test", str(FIXTURES / "labelled"))
    assert run.code == 0, run.out + run.err
    assert run.out.splitlines() == [
        "PASS labelled/ml-team/frac-quarter",
        "PASS labelled/batch/frac-quarter",
        "PASS labelled/web/frac-quarter",
        "PASS scenarios/opted-in-by-label",
        "4 passed, 0 failed",
    ]


# test: wrong expectations fail, naming the case and the reason


def test_a_suite_with_wrong_expectations_fails_each_wrong_case() -> None:
    run = webhook_process("test", str(FIXTURES / "wrong-expectations"))
    assert run.code == 1, run.out + run.err
    lines = run.out.splitlines()
    assert "FAIL wrong-expectations/frac-quarter: expected a denial, but it was allowed" in lines
    assert any(
        line.startswith("FAIL wrong-expectations/ml/frac-quarter: the patched object differs")
        for line in lines
    )
    assert "    -          example.com/vram: '4096'" in lines
    assert "    +          example.com/vram: '3840'" in lines
    assert any(
        line.startswith("FAIL wrong-expectations/bad-req-ne-lim: the message lacks 'exceeds quota'")
        for line in lines
    )
    assert (
        "FAIL wrong-expectations/plain-web: no policy judged it; expected policy 'default'" in lines
    )
    assert "PASS wrong-expectations/web/plain-web" in lines
    assert summary(run) == (1, 4)
    assert run.err == ""


def test_scenario_folders_with_wrong_expectations_fail() -> None:
    run = webhook_process("test", str(FIXTURES / "wrong-scenarios"))
    assert run.code == 1, run.out + run.err
    lines = run.out.splitlines()
    assert "FAIL shipped/plain-web-expected-denied: expected a denial, but it was allowed" in lines
    assert "FAIL shipped/requests-differ-wrong-code: denied with code 403, not 400" in lines
    assert any(
        line.startswith(
            "FAIL shipped/quarter-wrong-warning: no warning contains "
            "'pinned to nvidia.com/gpu.product=NVIDIA-L4'"
        )
        for line in lines
    )
    assert summary(run) == (0, 3)


def test_one_failing_path_fails_the_run() -> None:
    run = webhook("test", "examples/policy-tests", str(FIXTURES / "wrong-scenarios"))
    assert run.code == 1
    passed, failed = summary(run)
    assert passed >= 7 and failed == 3


# test: suites that do not load are input errors


def test_an_unknown_field_in_a_suite_names_the_file_line_and_field() -> None:
    run = webhook_process("test", str(FIXTURES / "bad-suite"))
    assert run.code == 2
    assert run.out == ""
    assert (
        "tests/cli_fixtures/bad-suite/gpu-test.yaml:10: results[0].allowd: unknown field" in run.err
    )
    assert "gpu-test.yaml:9: results[0].allowed: is required" in run.err
    assert "Traceback" not in run.err


def test_a_suite_that_does_not_parse_names_the_file_and_line() -> None:
    run = webhook("test", str(FIXTURES / "unparseable-suite"))
    assert run.code == 2
    assert run.err.startswith(
        "python -m webhook test: tests/cli_fixtures/unparseable-suite/gpu-test.yaml:10: "
        "(yaml): invalid YAML"
    )
    assert run.out == ""


def write_suite(folder: Path, results: str, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pods.yaml").write_text(QUARTER_POD)
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "gpu-test.yaml").write_text(
        "apiVersion: gpu-admission.example.com/v1alpha1\n"
        "kind: GPUPolicyTest\n"
        "metadata: {name: t}\n"
        f"policies: {REPO_ROOT / 'policies'}\n"
        "resources: [pods.yaml]\n"
        f"results:\n{results}"
    )
    return folder


@pytest.mark.parametrize(
    ("results", "problem"),
    [
        (
            "  - {resource: no-such-pod, allowed: true}\n",
            "gpu-test.yaml:7: results[0].resource: no manifest in resources is named "
            "'no-such-pod' (there are: Pod/frac-quarter)",
        ),
        (
            "  - {resource: frac-quarter, kind: Deployment, allowed: true}\n",
            "gpu-test.yaml:7: results[0].resource: no manifest of kind Deployment",
        ),
        (
            "  - {resource: frac-quarter, allowed: true, message: [x]}\n",
            "gpu-test.yaml:7: results[0].message: is for denials",
        ),
        (
            "  - {resource: frac-quarter, allowed: false, patched: true}\n",
            "gpu-test.yaml:7: results[0].allowed: a denied object is never patched",
        ),
        (
            "  - {resource: frac-quarter, allowed: true, patchedResource: nope.yaml}\n",
            "gpu-test.yaml:7: results[0].patchedResource: ",
        ),
        (
            "  - {resource: frac-quarter, allowed: true, endpoint: /validate}\n",
            "gpu-test.yaml:7: results[0].endpoint: '/validate' is not one of 'mutate', 'validate'",
        ),
    ],
    ids=[
        "unknown-resource",
        "wrong-kind",
        "message-on-allowed",
        "patched-denial",
        "missing-patched-resource",
        "endpoint-spelling",
    ],
)
def test_suite_problems_beyond_the_schema_are_input_errors(
    tmp_path: Path, results: str, problem: str
) -> None:
    folder = write_suite(tmp_path / "suite", results)
    run = webhook("test", str(folder))
    assert run.code == 2, run.out
    assert problem in run.err
    assert run.out == ""


def test_a_scenario_that_expects_a_patch_needs_the_patched_object(tmp_path: Path) -> None:
    folder = tmp_path / "group" / "quarter"
    folder.mkdir(parents=True)
    (folder / "resource.yaml").write_text(QUARTER_POD)
    (folder / "expected.yaml").write_text("allowed: true\npatched: true\n")
    run = webhook("test", str(tmp_path))
    assert run.code == 2
    assert "says patched: true, but there is no mutated.json or mutated.yaml" in run.err


def test_a_scenario_folder_given_alone_uses_its_group_policies() -> None:
    run = webhook("test", "tests/scenarios/strict/model-required")
    assert run.code == 0, run.out + run.err
    assert run.out.splitlines() == ["PASS strict/model-required", "1 passed, 0 failed"]


def test_scenarios_without_policies_use_the_policies_option(tmp_path: Path) -> None:
    run = webhook("test", "tests/scenarios/shipped", "--policies", str(tmp_path / "none"))
    assert run.code == 2
    assert "which has no policies/ folder above it; --policies names another" in run.err
    assert "the policy directory does not exist" in run.err


@pytest.mark.parametrize("where", ["no/such/dir", "tests/unit"])
def test_a_path_without_tests_is_an_input_error(where: str) -> None:
    run = webhook("test", where)
    assert run.code == 2
    assert run.err.count("\n") == 1, run.err


# lint


def test_lint_says_the_shipped_policies_are_ok() -> None:
    run = webhook("lint")
    assert run.code == 0
    ok, notice = run.out.splitlines()
    assert re.fullmatch(r"policies/: \d+ polic(y|ies) OK: .*\bdefault\b.*", ok)
    # The shipped pool states no hard limit: lint says so, and it is no problem.
    assert notice.startswith('policies/: notice: policy "default" does not enforce its shares')


def test_lint_prints_every_problem_with_file_line_and_field(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text(
        "apiVersion: gpu-admission.example.com/v1alpha1\n"
        "kind: GPUPolicy\n"
        "metadata: {name: broken}\n"
        "spec:\n"
        "  gpuResorces: []\n"
        "  sharing: {vramResource: example.com/vram, unit: KiB, models: []}\n"
    )
    run = webhook("lint", str(tmp_path))
    assert run.code == 1
    lines = run.out.splitlines()
    assert f"{tmp_path}/broken.yaml:5: spec.gpuResorces: unknown field" in lines[0]
    assert any(line.startswith(f"{tmp_path}/broken.yaml:6: spec.sharing") for line in lines)
    assert lines[-1] == f"{tmp_path}/: {len(lines) - 1} problems"


def test_lint_reports_the_semantic_problems_a_schema_cannot_see(tmp_path: Path) -> None:
    header = "apiVersion: gpu-admission.example.com/v1alpha1\nkind: GPUPolicy\n"
    (tmp_path / "a.yaml").write_text(
        header + "metadata: {name: team-a}\n"
        "spec:\n"
        "  match: {namespaces: [ml-*]}\n"
        "  sharing:\n"
        "    vramResource: vram.kubernetes.io/mem\n"
        "    defaultModel: Tesla-T9\n"
        "    models: [{product: Tesla-T4, memoryMiB: 15360}]\n"
        "    env: [{name: SHARE, value: '{fractoin}'}]\n"
    )
    (tmp_path / "b.yaml").write_text(
        header + "metadata: {name: team-b}\nspec:\n  match: {namespaces: [ml-vision]}\n"
    )
    run = webhook("lint", str(tmp_path))
    assert run.code == 1
    for expected in (
        f"{tmp_path}/a.yaml:7: spec.sharing.vramResource: the kubernetes.io domain is reserved",
        f"{tmp_path}/a.yaml:8: spec.sharing.defaultModel: 'Tesla-T9' is not in models",
        f"{tmp_path}/a.yaml:10: spec.sharing.env[0].value: unknown placeholder {{fractoin}}",
    ):
        assert any(line.startswith(expected) for line in run.out.splitlines()), run.out
    # Overlaps are judged once every policy loads on its own.
    (tmp_path / "a.yaml").write_text(
        header + "metadata: {name: team-a}\nspec:\n  match: {namespaces: [ml-*]}\n"
    )
    run = webhook("lint", str(tmp_path))
    assert run.code == 1
    assert f"{tmp_path}/b.yaml:3: spec.match: policy 'team-b' could govern" in run.out, run.out


@pytest.mark.parametrize(
    "args", [["lint", "no-such-dir"], ["lint", "README.md"], ["lint", "a", "b"]]
)
def test_lint_usage_errors(args: list[str]) -> None:
    run = webhook(*args)
    assert run.code == 2
    assert run.out == ""


# review


def test_review_prints_the_verdict_and_the_admitted_object() -> None:
    run = webhook("review", "-f", "-", stdin=QUARTER_POD)
    assert run.code == 0
    assert run.err.splitlines()[:3] == [
        "CREATE Pod default/frac-quarter (<stdin>:1)",
        "  verdict: allowed, patched (9 operations)",
        "  policy:  default",
    ]
    assert "  warning: pinned to nvidia.com/gpu.product=Tesla-T4" in run.err
    [pod] = objects(run.out)
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    assert container["resources"]["limits"] == {"memory": "8Gi", "example.com/vram": "3840"}
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}  # type: ignore[index]


def test_review_json_output_is_the_same_object_with_its_verdict() -> None:
    as_yaml = webhook("review", "-f", "-", stdin=QUARTER_POD)
    as_json = webhook("review", "-f", "-", "-o", "json", stdin=QUARTER_POD)
    assert as_json.code == 0
    listed = json.loads(as_json.out)
    assert listed["items"] == [objects(as_yaml.out)[0]]
    [verdict] = listed["verdicts"]
    assert verdict["verdict"] == "patched" and verdict["name"] == "frac-quarter"
    assert verdict["policy"] == "default" and verdict["source"] == "<stdin>:1"


def test_review_diff_shows_the_change() -> None:
    run = webhook("review", "-f", "-", "--diff", stdin=QUARTER_POD)
    assert run.code == 0
    lines = run.out.splitlines()
    assert lines[:2] == ["--- <stdin>:1 (as written)", "+++ <stdin>:1 (as admitted)"]
    assert "-          nvidia.com/gpu: '0.25'" in lines
    assert "+          example.com/vram: '3840'" in lines


def test_review_of_an_untouched_pod_prints_no_diff() -> None:
    plain = QUARTER_POD.replace('nvidia.com/gpu: "0.25", ', "")
    run = webhook("review", "-f", "-", "--diff", stdin=plain)
    assert run.code == 0
    assert run.out == ""
    assert "  verdict: allowed, unchanged" in run.err


def test_review_of_a_denied_object_exits_1_with_the_message() -> None:
    run = webhook("review", "-f", "-", "--validate", stdin=QUARTER_POD)
    assert run.code == 1
    assert run.out == ""
    assert "  verdict: denied, 403 Forbidden" in run.err
    assert "not rewritten" in run.err


def test_review_of_several_documents_reviews_each_and_prints_none_when_one_is_denied() -> None:
    run = webhook("review", "-f", "examples/policy-tests/resources/pods.yaml")
    assert run.code == 1
    assert run.out == ""
    assert run.err.count("verdict: denied") == 2
    assert run.err.count("verdict: allowed") == 3
    assert run.err.endswith("2 objects refused: nothing is printed to apply\n")


def test_review_opens_a_list_in_a_list_as_kubectl_does() -> None:
    """kubectl applies the items of a List inside a List: each is reviewed, never passed on."""
    nested = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [{"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(QUARTER_POD)]}],
    }
    denied = json.dumps(nested).replace('"0.25"', '"1.5"')
    run = webhook("review", "-f", "-", stdin=denied)
    assert run.code == 1 and run.out == ""
    assert "verdict: denied" in run.err and "passes through" not in run.err


def test_review_diff_is_read_not_applied_so_it_shows_the_admitted_changes_beside_a_denial() -> None:
    run = webhook("review", "-f", "examples/policy-tests/resources/pods.yaml", "--diff")
    assert run.code == 1
    assert "+++ examples/policy-tests/resources/pods.yaml:3 (as admitted)" in run.out
    assert "nothing is printed to apply" not in run.err


def test_review_of_several_documents_as_json_gives_each_verdict_in_order() -> None:
    run = webhook("review", "-f", "examples/policy-tests/resources/pods.yaml", "-o", "json")
    assert run.code == 1
    listed = json.loads(run.out)
    assert listed["kind"] == "List" and listed["items"] == [] and listed["refused"] == 2
    said = [(v["name"], v["verdict"]) for v in listed["verdicts"]]
    assert [verdict for _, verdict in said].count("denied") == 2
    assert ("frac-quarter", "patched") in said and ("plain-web", "allowed") in said
    denied = [v for v in listed["verdicts"] if v["verdict"] == "denied"]
    assert all(v["message"] for v in denied)


def test_review_strict_refuses_what_audit_lets_through(tmp_path: Path) -> None:
    """Audit lets the pod through and says it would deny it: CI with --strict fails on it
    now, rather than the day the policy goes to Enforce."""
    audit = (REPO_ROOT / "policies" / "default.yaml").read_text()
    (tmp_path / "default.yaml").write_text(
        audit.replace("spec:\n", "spec:\n  enforcement: Audit\n", 1)
    )
    denied = QUARTER_POD.replace('"0.25"', '"1.5"')
    lenient = webhook("review", "-f", "-", "--policies", str(tmp_path), stdin=denied)
    assert lenient.code == 0 and "would deny (Audit)" in lenient.err and lenient.out
    strict = webhook("review", "-f", "-", "--policies", str(tmp_path), "--strict", stdin=denied)
    assert strict.code == 1 and strict.out == ""
    as_json = webhook(
        "review", "-f", "-", "--policies", str(tmp_path), "--strict", "-o", "json", stdin=denied
    )
    [verdict] = json.loads(as_json.out)["verdicts"]
    assert verdict["verdict"] == "would-deny" and "(Audit)" in verdict["message"]


def test_review_of_an_admission_review_gives_the_servers_patched_object() -> None:
    scenario = Path("tests/scenarios/shipped/01-create-pod-frac-quarter")
    run = webhook("review", "-f", str(scenario / "review.json"), "-o", "json")
    assert run.code == 0, run.err
    assert run.err.startswith("CREATE Pod ml/frac-quarter (")
    assert json.loads(run.out)["items"] == [json.loads((scenario / "mutated.json").read_text())]


def test_review_writes_a_lone_surrogate_as_its_json_escape() -> None:
    """UTF-8 cannot encode the string JSON's `\\ud800` stands for; the command still answers."""
    scenario = Path("tests/scenarios/fuzz-found/lone-surrogate-in-long-annotations")
    run = webhook_process("review", "-f", str(scenario / "review.json"), "-o", "json")
    assert run.code == 0, run.err
    assert '"team": "\\ud800"' in run.out
    assert json.loads(run.out)["items"] == [json.loads((scenario / "mutated.json").read_text())]


def test_review_with_namespace_labels_selects_the_labelled_policy() -> None:
    args = [
        "review",
        "-f",
        str(FIXTURES / "labelled/resources/pods.yaml"),
        "--policies",
        str(FIXTURES / "labelled/policies"),
        "-n",
        "ml-team",
    ]
    labelled = webhook(*args, "--namespace-labels", "gpu-sharing=enabled")
    assert labelled.code == 0
    assert "  policy:  opted-in" in labelled.err
    unknown = webhook(*args)
    assert unknown.code == 1
    assert "  policy:  cluster-default" in unknown.err
    assert 'skipped "opted-in": labels of namespace "ml-team" unknown (no --namespace-l' in (
        unknown.err
    )


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["-f", "no-such-file.yaml"], "", "no-such-file.yaml: no such file"),
        (["-f", "-"], "a: [\n", "<stdin>:2: (yaml): invalid YAML"),
        (["-f", "-"], "- just\n- a list\n", "<stdin>:1: not a Kubernetes object but a list"),
        (["-f", "-"], "", "<stdin>: holds no objects"),
        (
            ["-f", "-"],
            '{"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview"}',
            "not an AdmissionReview the webhook answers: apiVersion 'admission.k8s.io/v2'",
        ),
        (
            ["-f", "tests/scenarios/shipped/01-create-pod-frac-quarter/review.json", "-n", "x"],
            "",
            "--namespace applies to manifests",
        ),
        (["-f", "-", "--policies", "tests"], QUARTER_POD, "the policies in tests do not load:"),
        (["-f", "-", "--namespace-labels", "team"], QUARTER_POD, "'team' is not key=value"),
        (["-f", "-", "--namespace-labels", "a=b c"], QUARTER_POD, "label a='b c'"),
        (["-f", "-", "-o", "toml"], QUARTER_POD, "invalid choice: 'toml'"),
    ],
    ids=[
        "missing-file",
        "not-yaml",
        "not-an-object",
        "empty",
        "unsupported-review",
        "namespace-with-review",
        "policies-do-not-load",
        "labels-without-value",
        "bad-label-value",
        "bad-output",
    ],
)
def test_review_input_errors_exit_2_without_a_traceback(
    args: list[str], stdin: str, message: str
) -> None:
    run = webhook("review", *args, stdin=stdin)
    assert run.code == 2
    assert message in run.err
    assert run.out == ""
    assert "Traceback" not in run.err


def test_review_checks_every_document_before_reviewing_any() -> None:
    run = webhook("review", "-f", "-", stdin=QUARTER_POD + "---\nkind: Service\n")
    assert run.code == 2
    assert run.out == ""
    assert "verdict" not in run.err
    assert "<stdin>:10: not a Kubernetes object: apiVersion is missing" in run.err


def test_the_module_runs_and_reports_usage_errors() -> None:
    run = webhook_process("review", "-f", "no-such-file.yaml")
    assert run.code == 2
    assert run.err == "python -m webhook review: no-such-file.yaml: no such file\n"
    assert webhook_process().code == 2


def test_the_installed_command_answers_as_python_dash_m_does() -> None:
    installed = Path(sys.executable).parent / "gpu-admission"
    assert installed.is_file(), "make venv installs the project, and with it the command"
    version = subprocess.run(
        [str(installed), "--version"], capture_output=True, text=True, check=False
    )
    assert (version.returncode, version.stdout) == (0, f"gpu-admission {__version__}\n")
    lint = subprocess.run(
        [str(installed), "lint", "policies"], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert lint.returncode == 0 and "1 policy OK: default" in lint.stdout
    wrong = subprocess.run(
        [str(installed), "review", "-f", "missing.yaml"], capture_output=True, text=True
    )
    assert wrong.returncode == 2 and wrong.stderr.startswith("gpu-admission review: ")
    assert webhook("--version").out == f"python -m webhook {__version__}\n"


APP = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: cfg}, data: {a: "1"}}
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: serve}
    spec:
      selector: {matchLabels: {app: serve}}
      template:
        metadata: {labels: {app: serve}}
        spec:
          containers:
            - name: serve
              image: vllm/vllm-openai:v0.6.3
              resources: {limits: {nvidia.com/gpu: "0.5"}}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
"""


def test_review_takes_a_whole_app_and_passes_the_other_kinds_through_in_order() -> None:
    run = webhook("review", "-f", "-", stdin=APP)
    assert run.code == 0, run.err
    documents = list(yaml.safe_load_all(run.out))
    assert [d["kind"] for d in documents] == ["Service", "ConfigMap", "Deployment", "Secret"]
    assert documents[0] == yaml.safe_load(APP.split("---")[0])
    limits = documents[2]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"example.com/vram": "7680"}
    notes = [line for line in run.err.splitlines() if "passes through" in line]
    assert notes == [
        "<stdin>:1: Service (v1) passes through: not a kind the webhook judges",
        "<stdin>:9: ConfigMap (v1) passes through: not a kind the webhook judges",
        "<stdin>:23: Secret (v1) passes through: not a kind the webhook judges",
    ]
    as_json = webhook("review", "-f", "-", "-o", "json", stdin=APP)
    listed = json.loads(as_json.out)
    assert [item["kind"] for item in listed["items"]] == [
        "Service",
        "ConfigMap",
        "Deployment",
        "Secret",
    ]


def test_review_of_an_app_with_a_denied_workload_exits_1_and_prints_nothing_to_apply() -> None:
    """The documented pipe applies none of the app rather than the app without its denied
    part: kubectl apply is given nothing, and fails."""
    denied = APP.replace('nvidia.com/gpu: "0.5"', 'nvidia.com/gpu: "1.5"')
    run = webhook("review", "-f", "-", stdin=denied)
    assert run.code == 1
    assert run.out == ""
    assert "verdict: denied" in run.err
    listed = json.loads(webhook("review", "-f", "-", "-o", "json", stdin=denied).out)
    assert [v["verdict"] for v in listed["verdicts"]] == [
        "not-judged",
        "not-judged",
        "denied",
        "not-judged",
    ]
