"""The benchmark's own logic, without wrk or a server: targets, result lines, scenario bodies,
generated policy sets, the floor and the per-connection-TLS baseline. Nothing here is timed."""

from __future__ import annotations

import base64
import copy
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from gunicorn.config import Config

from bench.decision import answer_of
from bench.floor_app import app as floor_app
from bench.growth import container_growth, container_slopes
from bench.policy_sets import write_policy_set
from bench.run import BENCH_README, memory_figures, spread_figures, update_readme
from bench.scenarios import (
    MANY_CONTAINERS,
    Scenario,
    answer_problem,
    build_scenarios,
    captured,
    in_namespace,
    with_containers,
)
from bench.stats import percentile
from bench.summary import (
    BEGIN,
    END,
    markdown,
    nodes_section,
    outcome_records,
    replace_between_markers,
)
from bench.targets import TARGETS, evaluate, lookup
from bench.wrk import parse_result
from webhook.cli.admit import review_body
from webhook.policy.namespace_labels import NoCluster
from webhook.policy.policy_set import PolicySet
from webhook.policy.store import load_directory

REPO = Path(__file__).resolve().parents[2]
SHIPPED_POLICIES = REPO / "policies"
SHIPPED_REVIEWS = REPO / "tests/scenarios/shipped"
GPU_POD = "01-create-pod-frac-quarter"


@pytest.fixture(scope="module")
def shipped_policies() -> PolicySet:
    policy_set = load_directory(SHIPPED_POLICIES).policy_set
    assert policy_set is not None
    return policy_set


@pytest.fixture(scope="module")
def scenarios() -> dict[str, Scenario]:
    return {scenario.name: scenario for scenario in build_scenarios(SHIPPED_REVIEWS)}


# Targets


def clean_run(rate: float = 3000.0, p50: float = 1.0, p99: float = 4.0) -> dict[str, Any]:
    return {
        "rate": rate,
        "requests": int(rate * 5),
        "errors": {"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 0},
        "error_count": 0,
        "latency_ms": {"p50": p50, "p90": p50 * 2, "p99": p99, "max": p99 * 2},
    }


def passing_figures() -> dict[str, Any]:
    """Figures that meet every target."""
    ours = spread_figures([clean_run(rate) for rate in (2900, 3000, 3100, 3000, 2950)])
    floor = spread_figures([clean_run(rate) for rate in (3300, 3200, 3250, 3100, 3400)])
    tls_ours = spread_figures([clean_run(rate) for rate in (900, 950, 880)])
    tls_baseline = spread_figures([clean_run(rate) for rate in (400, 420, 390)])
    return {
        "http": {
            "gpu-pod": {
                "kept-alive": {
                    "ours": {"rates": {"500": clean_run(500, 1.2, 6.0)}},
                    "floor": {"rates": {"500": clean_run(500, 1.0, 3.0)}},
                }
            }
        },
        "spread": {"ours": ours, "floor": floor, "ours_over_floor": 3000 / 3250},
        "tls": {"ours": tls_ours, "baseline": tls_baseline, "ratio": 900 / 400},
        "decision": {
            "scenarios": {
                "gpu-pod": {"decide_us": {"median": 45.0, "p99": 90.0}},
                "plain-pod": {"decide_us": {"median": 8.0, "p99": 20.0}},
            },
            "policies": {"ratio": 1.2},
            "containers": {"slope_ratio": 1.1},
        },
        "memory": {"requests_served": 120_000, "max_after_mib": 70.0, "max_growth_mib": 2.0},
        "nodes": {
            "sizes": {
                "10000": node_size(seconds=8.0, patches=5_000, rss=105.0),
                "100000": node_size(seconds=55.0, patches=50_000, rss=120.0),
            },
            "serial": {"nodes": 10_000, "first": node_pass(20.0, 5_000, 104.0)},
            "parallel_over_serial": 2.5,
            "bytes_per_node": 160,
        },
    }


def node_pass(seconds: float, patches: int, rss: float) -> dict[str, Any]:
    return {
        "seconds": seconds,
        "cpu_seconds": seconds * 0.9,
        "peak_rss_mib": rss,
        "patched": patches,
        "patches_per_second": patches / seconds if patches else None,
        "exit_code": 0,
        "error_count": 0,
    }


def node_size(seconds: float, patches: int, rss: float) -> dict[str, Any]:
    inventory = {"list_seconds": seconds / 4, "peak_rss_mib": rss - 10, "error_count": 0}
    return {
        "first": node_pass(seconds, patches, rss),
        "second": node_pass(seconds / 3, 0, rss),
        "inventory": inventory,
    }


def test_every_target_passes_on_passing_figures() -> None:
    outcomes = evaluate(passing_figures())
    assert [o.target.name for o in outcomes if not o.passed] == []
    # Each judged on a figure it found, not on a default.
    assert [o.target.name for o in outcomes if o.value is None or o.reason] == []


def _parent(figures: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    parent, _, last = path.rpartition(".")
    return lookup(figures, parent), last


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(figures: dict[str, Any]) -> None:
        node, key = _parent(figures, path)
        node[key] = value

    return change


def _errored(path: str, kind: str = "read", index: int = 0) -> Callable[[dict[str, Any]], None]:
    """The run at `path` (or the run at `index` of the runs there) with 3 errors of `kind`."""

    def change(figures: dict[str, Any]) -> None:
        run = lookup(figures, path)
        run = run[index] if isinstance(run, list) else run
        run["errors"][kind] = 3
        run["error_count"] = 3

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def change(figures: dict[str, Any]) -> None:
        node, key = _parent(figures, path)
        del node[key]

    return change


KEPT_ALIVE = "http.gpu-pod.kept-alive"
SATURATION_RATIO = "gpu-pod kept-alive saturation, ours ÷ floor (medians of 5 runs each)"
SATURATION = "gpu-pod kept-alive saturation (median of 5 runs)"
TLS = "new TLS connection per request, ours ÷ per-connection-TLS baseline"
FAILURES = [
    pytest.param(
        _set("spread.ours_over_floor", 0.84),
        SATURATION_RATIO,
        "",
        id="slower-than-85%-of-the-floor",
    ),
    pytest.param(_set("spread.ours.median", 1999.0), SATURATION, "", id="under-2000-per-second"),
    pytest.param(
        _errored("spread.floor.runs", index=4),
        SATURATION_RATIO,
        "errors",
        id="an-errored-floor-run-voids-the-ratio",
    ),
    pytest.param(
        _errored("spread.ours.runs", "status", index=2),
        SATURATION,
        "errors",
        id="non-2xx-answers-void-the-rate",
    ),
    pytest.param(
        _set(f"{KEPT_ALIVE}.ours.rates.500.latency_ms.p50", 2.01),
        "gpu-pod kept-alive at 500/s, p50",
        "",
        id="p50-over-2ms",
    ),
    pytest.param(
        _errored(f"{KEPT_ALIVE}.ours.rates.500", "timeout"),
        "gpu-pod kept-alive at 500/s, p99",
        "errors",
        id="timeouts-void-the-p99",
    ),
    pytest.param(
        _set("spread.ours.slowest_over_median", 0.79),
        "spread of 5 saturation runs, slowest ÷ median",
        "",
        id="spread-too-wide",
    ),
    pytest.param(
        _errored("spread.ours.runs", "timeout", index=3),
        "spread of 5 saturation runs, slowest ÷ median",
        "errors",
        id="one-errored-run-of-five-voids-the-spread",
    ),
    pytest.param(_set("tls.ratio", 1.79), TLS, "", id="tls-under-1.8x"),
    pytest.param(_errored("tls.baseline.runs", "connect", 1), TLS, "errors", id="tls-errored"),
    pytest.param(_drop("tls.baseline"), TLS, "missing", id="tls-baseline-not-run"),
    pytest.param(
        _set("decision.scenarios.gpu-pod.decide_us.median", 60.5),
        "in-process decision, gpu-pod median",
        "",
        id="gpu-pod-decision-over-60us",
    ),
    pytest.param(
        _drop("decision.scenarios.plain-pod"),
        "in-process decision, plain-pod median",
        "not measured",
        id="plain-pod-not-measured",
    ),
    pytest.param(
        _set("decision.policies.ratio", 2.5),
        "in-process decision, 1,000 policies ÷ 1 policy",
        "",
        id="policies-not-flat",
    ),
    pytest.param(
        _set("decision.containers.slope_ratio", None),
        "in-process decision linear in containers, slope 10→100 ÷ slope 1→10",
        "not measured",
        id="no-slope",
    ),
    pytest.param(
        _set("memory.max_after_mib", 80.5),
        "RSS per worker after 100,000 requests (largest worker)",
        "",
        id="rss-over-80mib",
    ),
    pytest.param(
        _set("memory.requests_served", 99_999),
        "RSS growth per worker from warm-up to the end (largest)",
        "needs",
        id="memory-read-too-early",
    ),
    pytest.param(
        _set("nodes.sizes.100000.first.peak_rss_mib", 150.5),
        "advertiser peak RSS, 100,000 nodes",
        "",
        id="advertiser-over-150mib",
    ),
    pytest.param(
        _set("nodes.sizes.100000.second.error_count", 1),
        "advertiser peak RSS, 100,000 nodes",
        "errors",
        id="advertiser-second-pass-failed",
    ),
    pytest.param(
        _set("nodes.sizes.100000.first.seconds", 61.0),
        "advertiser first pass, 100,000 nodes of which 50,000 in the pool",
        "",
        id="first-pass-over-a-minute",
    ),
    pytest.param(
        _drop("nodes.sizes.100000"),
        "node inventory peak RSS, 100,000 nodes",
        "not measured",
        id="quick-run-without-100k-nodes",
    ),
    pytest.param(
        _set("nodes.parallel_over_serial", 1.1),
        "advertiser patches/s at 10,000 nodes, in parallel ÷ one at a time",
        "",
        id="parallel-no-faster",
    ),
]


@pytest.mark.parametrize(("change", "failing", "reason"), FAILURES)
def test_a_target_fails(
    change: Callable[[dict[str, Any]], None], failing: str, reason: str
) -> None:
    figures = passing_figures()
    change(figures)
    outcomes = {outcome.target.name: outcome for outcome in evaluate(figures)}
    assert failing in outcomes
    assert not outcomes[failing].passed
    # A figure beyond its limit fails without any other reason.
    assert reason in outcomes[failing].reason if reason else outcomes[failing].reason == ""


def test_an_errored_run_never_passes_even_with_a_great_figure() -> None:
    figures = passing_figures()
    run = figures["tls"]["ours"]["runs"][0]
    run["rate"], run["errors"]["connect"], run["error_count"] = 10_000.0, 1, 1
    figures["tls"]["ratio"] = 25.0
    tls = next(o for o in evaluate(figures) if o.target.figure == "tls.ratio")
    assert not tls.passed
    assert tls.errors == 1


def test_nothing_measured_fails_everything() -> None:
    assert not any(outcome.passed for outcome in evaluate({}))


# Result lines of the Lua scripts

WRK_REPORT = """Running 5s test @ https://127.0.0.1:9443/mutate
  2 threads and 4 connections
  12001 requests in 5.00s, 3.35MB read
Requests/sec:   2400.12
"""


def test_saturation_line_is_parsed() -> None:
    line = (
        'BENCH_RESULT {"latency_ms":{"p90":2.5,"p99":7.1,"p50":1.2,"max":30.0},'
        '"mode":"saturation","requests":12001,"duration_s":5.0002,"rate":2400.1,'
        '"errors":{"timeout":0,"connect":0,"read":2,"write":0,"status":1}}'
    )
    result = parse_result(WRK_REPORT + line + "\n")
    assert result is not None
    assert result["rate"] == 2400.1
    assert result["requests"] == 12001
    assert result["latency_ms"] == {"p50": 1.2, "p90": 2.5, "p99": 7.1, "max": 30.0}
    assert result["errors"] == {"timeout": 0, "connect": 0, "read": 2, "write": 0, "status": 1}
    assert result["error_count"] == 3


def test_fixed_rate_line_counts_non_2xx_and_lost_requests_as_errors() -> None:
    line = (
        'BENCH_RESULT {"mode":"fixed-rate","lost":1,"behind":12,"duration_s":5.01,'
        '"errors":{"timeout":0,"connect":0,"read":1,"write":0,"status":2},'
        '"latency_ms":{"p90":1.9,"p99":4.2,"max":9.0,"p50":1.1},"requests":2497,"non2xx":4,'
        '"rate":498.4,"scheduled":2500,"target_rate":500,"threads":4}'
    )
    result = parse_result(WRK_REPORT + line)
    assert result is not None
    assert result["target_rate"] == 500
    assert result["behind"] == 12
    # non2xx covers wrk's status count (4xx and 5xx), so status is not counted twice.
    assert result["errors"] == {
        "timeout": 0,
        "connect": 0,
        "read": 1,
        "write": 0,
        "non2xx": 4,
        "lost": 1,
    }
    assert result["error_count"] == 6


def test_a_run_without_a_result_line_has_no_result() -> None:
    assert parse_result(WRK_REPORT) is None
    assert parse_result("PANIC: unprotected error in call to Lua API") is None


def test_the_last_result_line_wins() -> None:
    first = 'BENCH_RESULT {"mode":"saturation","rate":1,"requests":1,"errors":{},"latency_ms":{}}'
    last = 'BENCH_RESULT {"mode":"saturation","rate":2,"requests":2,"errors":{},"latency_ms":{}}'
    result = parse_result(f"{first}\n{last}\n")
    assert result is not None
    assert result["rate"] == 2
    assert result["error_count"] == 0


# Scenario bodies


def test_the_forty_container_pod_keeps_everything_but_its_containers() -> None:
    original = captured(GPU_POD, SHIPPED_REVIEWS)
    grown = with_containers(original, MANY_CONTAINERS)
    containers = grown["request"]["object"]["spec"]["containers"]
    names = [container["name"] for container in containers]
    assert len(names) == MANY_CONTAINERS == len(set(names))
    assert names[:3] == ["infer-00", "infer-01", "infer-02"]
    template = original["request"]["object"]["spec"]["containers"][0]
    for container in containers:
        assert {**container, "name": template["name"]} == template
        assert list(container) == list(template)  # the captured key order
    rest = copy.deepcopy(grown)
    rest["request"]["object"]["spec"]["containers"] = [template]
    assert rest == original


def test_the_forty_container_pod_is_patched_in_every_container(
    scenarios: dict[str, Scenario], shipped_policies: PolicySet
) -> None:
    scenario = scenarios[f"pod-{MANY_CONTAINERS}"]
    answer = answer_of(scenario.body, shipped_policies)
    assert answer_problem("patched", scenario.uid, answer) is None
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    mutated = jsonpatch.apply_patch(scenario.review["request"]["object"], patch)
    for container in mutated["spec"]["containers"]:
        for amounts in container["resources"].values():
            assert "nvidia.com/gpu" not in amounts
            assert amounts["example.com/vram"] == "2048"  # 25m of 81920 MiB


@pytest.mark.parametrize("name", ["gpu-pod", "plain-pod", "pod-40", "deployment"])
def test_each_scenario_gets_the_answer_it_expects(
    name: str, scenarios: dict[str, Scenario], shipped_policies: PolicySet
) -> None:
    scenario = scenarios[name]
    assert (
        answer_problem(scenario.expect, scenario.uid, answer_of(scenario.body, shipped_policies))
        is None
    )


def test_the_committed_bodies_are_what_the_builders_make(scenarios: dict[str, Scenario]) -> None:
    for scenario in scenarios.values():
        assert (REPO / "bench/reviews" / f"{scenario.name}.json").read_bytes() == scenario.body


def test_bodies_are_compact_json_as_the_apiserver_sends() -> None:
    body = review_body({"a": [1, 2], "b": {"c": "d"}})
    assert body == b'{"a":[1,2],"b":{"c":"d"}}'


def test_a_review_moved_to_another_namespace() -> None:
    moved = in_namespace(captured(GPU_POD, SHIPPED_REVIEWS), "team-0007-serve")
    assert moved["request"]["namespace"] == "team-0007-serve"
    assert moved["request"]["object"]["metadata"]["namespace"] == "team-0007-serve"


PATCHED = {"allowed": True, "patchType": "JSONPatch", "patch": "W10="}
ANSWER_SHAPES = [
    pytest.param("patched", PATCHED, None, id="patched"),
    pytest.param("allowed", {"allowed": True}, None, id="allowed-unchanged"),
    pytest.param("patched", {"allowed": True}, "no patch", id="patch-missing"),
    pytest.param("allowed", PATCHED, "carries a patch", id="extra-patch"),
    pytest.param(
        "patched", {"allowed": False, "status": {"message": "no"}}, "not allowed", id="denied"
    ),
]


@pytest.mark.parametrize(("expect", "response", "problem"), ANSWER_SHAPES)
def test_answer_shapes(expect: Any, response: dict[str, Any], problem: str | None) -> None:
    answer = {"kind": "AdmissionReview", "response": {"uid": "u-1", **response}}
    found = answer_problem(expect, "u-1", answer)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_an_answer_for_another_uid_is_wrong() -> None:
    answer = {"kind": "AdmissionReview", "response": {"uid": "other", "allowed": True}}
    assert "uid" in (answer_problem("allowed", "mine", answer) or "")


# Generated policy sets


@pytest.mark.parametrize("size", [1, 2, 11])
def test_a_generated_set_loads_and_selects_the_intended_policy(size: int, tmp_path: Path) -> None:
    generated = write_policy_set(size, tmp_path, SHIPPED_POLICIES / "default.yaml")
    policy_set = load_directory(tmp_path).policy_set
    assert policy_set is not None
    assert len(policy_set.policies) == size
    for namespace, expected in (
        (generated.namespace, generated.policy),
        (generated.exact_namespace, generated.exact_policy),
    ):
        selection = policy_set.select(namespace, {}, NoCluster())
        assert selection.policy.name == expected
        review = in_namespace(captured(GPU_POD, SHIPPED_REVIEWS), namespace)
        answer = answer_of(review_body(review), policy_set)
        assert answer_problem("patched", review["request"]["uid"], answer) is None
        assert answer["response"]["auditAnnotations"]["policy"] == expected


def test_a_generated_set_is_half_exact_names_half_globs(tmp_path: Path) -> None:
    generated = write_policy_set(11, tmp_path, SHIPPED_POLICIES / "default.yaml")
    policy_set = load_directory(tmp_path).policy_set
    assert policy_set is not None
    teams = [policy for policy in policy_set.policies if policy.name.startswith("team-")]
    globs = [policy for policy in teams if policy.match.namespaces.globs]  # type: ignore[union-attr]
    assert len(teams) == 10
    assert len(globs) == 5
    # The pod sits in the namespace of the last team generated, matched by a glob.
    assert generated.policy == "team-0009"
    assert generated.namespace == "team-0009-serve"
    assert generated.exact_policy == "team-0010"


# Pure helpers of the run


def test_container_slopes() -> None:
    cases = {
        str(n): {"decide_us": {"median": median}} for n, median in ((1, 50), (10, 140), (100, 1040))
    }
    slopes = container_slopes(cases)
    assert slopes["slope_1_10_us"] == pytest.approx(10.0)
    assert slopes["slope_10_100_us"] == pytest.approx(10.0)
    assert slopes["slope_ratio"] == pytest.approx(1.0)
    assert slopes["ratio_100_over_1"] == pytest.approx(20.8)


def test_spread_figures() -> None:
    figures = spread_figures([clean_run(rate) for rate in (1000, 900, 1100, 1000, 700)])
    assert (figures["min"], figures["median"], figures["max"]) == (700, 1000, 1100)
    assert figures["slowest_over_median"] == pytest.approx(0.7)


def test_memory_figures_grow_from_warm_up_and_note_a_replaced_worker() -> None:
    readings = {
        "start": {11: 60.0, 12: 61.0},
        "warm": {11: 64.0, 12: 65.0},
        "after": {11: 66.5, 13: 70.0},
    }
    figures = memory_figures(readings, 100_500)
    by_pid = {worker["pid"]: worker for worker in figures["workers"]}
    assert by_pid[11]["growth_mib"] == pytest.approx(2.5)
    assert by_pid[12]["after_mib"] is None
    assert by_pid[13]["growth_mib"] is None
    assert figures["max_after_mib"] == 70.0
    assert figures["max_growth_mib"] == pytest.approx(2.5)
    assert figures["requests_served"] == 100_500


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([3.0], 99) == 3.0


def test_readme_section_is_replaced_between_the_markers_only() -> None:
    text = f"# Title\n\nBefore.\n{BEGIN}\nold figures\n{END}\nAfter.\n"
    updated = replace_between_markers(text, "| new | table |\n")
    assert updated == f"# Title\n\nBefore.\n{BEGIN}\n| new | table |\n{END}\nAfter.\n"
    assert replace_between_markers("# Title\n", "x") is None
    assert replace_between_markers(f"{END}\n{BEGIN}\n", "x") is None


def test_a_marker_quoted_in_prose_is_not_taken_for_one() -> None:
    text = f"Between `{BEGIN}` and `{END}`:\n{BEGIN}\nold\n{END}\n"
    updated = replace_between_markers(text, "new")
    assert updated == f"Between `{BEGIN}` and `{END}`:\n{BEGIN}\nnew\n{END}\n"


def test_the_tables_go_to_the_file_named_with_its_markers_only(tmp_path: Path) -> None:
    marked, unmarked = tmp_path / "marked.md", tmp_path / "unmarked.md"
    marked.write_text(f"# Benchmark\n{BEGIN}\nold\n{END}\nMethod.\n")
    unmarked.write_text("# Benchmark\n")
    assert update_readme(marked, "| new |\n")
    assert marked.read_text() == f"# Benchmark\n{BEGIN}\n| new |\n{END}\nMethod.\n"
    assert not update_readme(unmarked, "| new |\n")
    assert unmarked.read_text() == "# Benchmark\n"


def summary_of(figures: dict[str, Any]) -> str:
    """The summary of a run whose targets are judged on `figures`: the words and the targets
    table (the figures' own tables need whole runs)."""
    machine = {
        "date": "2026-11-25T15:21:54Z",
        "commit": "f3051f9",
        "uncommitted_changes": False,
        "cpu": "AMD EPYC",
        "cpu_count": 2,
        "python": "3.11.7",
        "wrk": "wrk 4.1.0",
    }
    targets = outcome_records(evaluate(figures))
    return markdown({"machine": machine, "settings": {"quick": False}, "targets": targets})


def test_a_missed_target_is_named_with_its_figure_before_any_table() -> None:
    figures = passing_figures()
    figures["tls"]["ratio"] = 1.72
    text = summary_of(figures)
    missed = (
        "- new TLS connection per request, ours ÷ per-connection-TLS baseline: "
        "1.72 x baseline, where the target is at least 1.8 x baseline"
    )
    heading = f"**1 of {len(TARGETS)} targets missed** in this run (FAIL in the last table):"
    assert f"{heading}\n\n{missed}\n" in text
    assert text.index(missed) < text.index("|")
    assert "| 1.72 x baseline | at least 1.8 x baseline | FAIL |" in text


def test_the_summary_tables_the_node_side_with_its_baseline() -> None:
    figures = passing_figures()
    text = "\n".join(nodes_section(figures["nodes"]))
    (row,) = [line for line in text.splitlines() if line.startswith("| 100,000 |")]
    assert row.split(" | ")[1:4] == ["55.0 s, 909.1/s", "49.5 s", "120.0"]
    assert "Baseline, 10,000 nodes one patch at a time: 20.0 s, 250.0 patches/s" in text
    assert "in parallel ÷ one at a time: 2.50x" in text
    assert "160 B" in text


def test_a_target_missed_for_want_of_a_figure_says_why() -> None:
    figures = passing_figures()
    del figures["decision"]["scenarios"]["plain-pod"]
    (line,) = [line for line in summary_of(figures).splitlines() if line.startswith("- ")]
    assert line.startswith("- in-process decision, plain-pod median: n/a µs, where the target")
    assert line.endswith("(decision.scenarios.plain-pod.decide_us.median was not measured)")


def test_a_run_that_meets_every_target_says_so() -> None:
    text = summary_of(passing_figures())
    assert f"All {len(TARGETS)} targets met (the last table)." in text
    assert "missed" not in text
    assert "FAIL" not in text


def test_the_figures_live_in_bench_readme_and_the_readme_quotes_no_failure() -> None:
    bench_readme = (REPO / BENCH_README).read_text()
    assert replace_between_markers(bench_readme, "x") is not None
    readme = (REPO / "README.md").read_text()
    assert BEGIN not in readme
    assert END not in readme
    assert not [line for line in readme.splitlines() if line.rstrip().endswith("FAIL |")]


def test_every_failed_row_of_the_shipped_tables_is_named_as_missed() -> None:
    text = (REPO / BENCH_README).read_text()
    tables = text[text.index(BEGIN) : text.index(END)]
    failed = [
        line.split(" | ")[0].removeprefix("| ")
        for line in tables.splitlines()
        if line.startswith("| ") and " | FAIL" in line
    ]
    named = [
        line.removeprefix("- ").split(": ")[0] for line in tables.splitlines() if line[:2] == "- "
    ]
    assert named == failed
    if failed:
        assert f"**{len(failed)} of " in tables


# The floor and the baseline


def test_the_floor_allows_any_review_echoing_its_uid(scenarios: dict[str, Scenario]) -> None:
    client = floor_app.test_client()
    scenario = scenarios["gpu-pod"]
    for path in ("/mutate", "/validate"):
        reply = client.post(path, data=scenario.body, content_type="application/json")
        assert reply.status_code == 200
        assert answer_problem("allowed", scenario.uid, reply.get_json()) is None
    assert client.get("/healthz").status_code == 200


def test_the_baseline_config_differs_from_the_webhooks_only_in_its_tls_context() -> None:
    webhook = vars(importlib.import_module("webhook.server.gunicorn_conf"))
    baseline = vars(importlib.import_module("bench.per_connection_tls_conf"))
    settings = Config().settings
    webhook_settings = {name for name in webhook if name in settings}
    assert {"on_starting", "child_exit", "ssl_context", "worker_class"} <= webhook_settings
    for name in webhook_settings - {"ssl_context"}:
        assert baseline.get(name) is webhook[name], name
    assert baseline["ssl_context"].__module__ == "bench.per_connection_tls_conf"


def test_the_container_growth_cases_are_each_answered_with_a_patch(
    scenarios: dict[str, Scenario], shipped_policies: PolicySet
) -> None:
    """A case answered otherwise would stop the bench (its shares must fit their card)."""
    measured: list[str] = []
    figures = container_growth(
        scenarios["gpu-pod"].review,
        shipped_policies,
        seconds=0.01,
        progress=lambda label, _: measured.append(label),
    )
    assert measured == ["1 container", "10 containers", "100 containers"]
    assert set(figures["cases"]) == {"1", "10", "100"}


def test_the_edge_table_in_bench_readme_says_the_lines_of_code_each_piece_has() -> None:
    from bench.edge_lines import piece_lines

    readme = (REPO / BENCH_README).read_text()
    found = piece_lines()
    for piece, lines in found.items():
        assert f"| {piece} | {lines} |" in readme, piece
    assert f"| in all | {sum(found.values())} |" in readme


def test_edge_lines_count_code_not_comments_docstrings_or_blank_lines(tmp_path: Path) -> None:
    from bench.edge_lines import code_lines

    module = tmp_path / "m.py"
    module.write_text(
        '"""A docstring\non two lines."""\n\n# a comment\nx = 1  # trailing\n\n'
        'def f() -> None:\n    """Its own."""\n    return None\n'
    )
    assert code_lines(module) == 3
