"""The probe's verdicts (webhook/probe/judge.py), first against real runs: what PyTorch, JAX and
CuPy did on an NVIDIA H200 with the env of a quarter share (tests/fixtures/probe/README.md),
then against the ends a real card gave no example of."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from webhook.probe.judge import Judgement, holds, judge
from webhook.probe.take_result import TakeResult, TakerRun

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "probe"
QUARTER_OF_AN_H200_MIB = 35942


def measured() -> dict[str, dict[str, Any]]:
    lines = (FIXTURES / "h200-quarter-share.jsonl").read_text().splitlines()
    return {case["case"]: case for case in map(json.loads, lines)}


MEASURED = measured()


def run_of(case: dict[str, Any]) -> TakerRun:
    result = case["result"]
    return TakerRun(
        framework=case["framework"],
        returncode=case["returncode"],
        result=None if result is None else TakeResult.from_mapping(result),
        stderr_tail=case["stderrTail"],
    )


def judged(name: str) -> Judgement:
    return judge(run_of(MEASURED[name]), QUARTER_OF_AN_H200_MIB)


# case: (verdict, limit held, process alive, words the note must hold)
ON_THE_H200 = {
    # PyTorch reads none of the shipped policy's variables (XLA, TF, MPS without a daemon).
    "torch-shipped-env": ("over", False, True, "at least 50074 MiB more"),
    "torch-alloc-conf": ("held", True, True, "614 MiB under"),
    "torch-allocconf-merge": ("held", True, True, "614 MiB under"),
    "torch-allocconf-bad-key": ("broken", False, False, "Unrecognized key 'no_such_option'"),
    "torch-throw-on-oom": ("broken", False, False, "throw_on_cudamalloc_oom"),
    "torch-async-backend": ("over", False, True, "nothing refused it"),
    "torch-both-names": ("over", False, True, "nothing refused it"),
    "mps-torch-shipped-env": ("held", True, True, "614 MiB under"),
    "jax-shipped-env": ("held", True, True, "614 MiB under"),
    "jax-old-var": ("held", True, True, "614 MiB under"),
    "jax-both-vars": ("off-gpu", False, False, "ran on cpu"),
    "mps-jax-shipped-env": ("died", False, False, "killed by SIGABRT"),
    "mps-jax-headroom-256": ("died", False, False, "central_gap_"),
    "mps-jax-headroom-512": ("held", True, True, "1126 MiB under"),
    "cupy-bare": ("over", False, True, "nothing refused it"),
    "cupy-limit-percent": ("held", True, True, "614 MiB under"),
    "cupy-limit-bytes": ("held", True, True, "102 MiB under"),
}


def test_every_measured_case_is_judged_here() -> None:
    assert set(ON_THE_H200) == set(MEASURED)


@pytest.mark.parametrize("case", ON_THE_H200)
def test_a_measured_run_gets_the_verdict_the_card_showed(case: str) -> None:
    verdict, held, alive, words = ON_THE_H200[case]
    judgement = judged(case)
    assert (judgement.verdict, judgement.held, judgement.alive) == (verdict, held, alive)
    assert words in judgement.note
    assert judgement.passed is (verdict == "held")


def test_the_shipped_env_does_not_hold_the_share_for_torch_but_its_allocator_fraction_does() -> (
    None
):
    assert judged("torch-shipped-env").got_mib == 86016
    assert judged("torch-alloc-conf").got_mib == 35328
    assert judged("torch-alloc-conf").margin_mib == QUARTER_OF_AN_H200_MIB - 35328


@pytest.mark.parametrize(
    ("cases", "share_holds"),
    [
        (["torch-alloc-conf", "jax-shipped-env", "cupy-limit-percent"], True),
        (["torch-shipped-env", "jax-shipped-env", "cupy-limit-percent"], False),
        (["torch-alloc-conf", "mps-jax-shipped-env"], False),
        ([], False),
    ],
    ids=["each framework told its share", "torch not told", "jax aborted", "nothing measured"],
)
def test_a_share_holds_only_when_it_held_for_every_framework(
    cases: list[str], share_holds: bool
) -> None:
    assert holds(judged(case) for case in cases) is share_holds


# Ends no real run gave -------------------------------------------------------------------


def result(**fields: Any) -> TakeResult:
    values: dict[str, Any] = {
        "framework": "torch",
        "version": "2.11.0",
        "got_mib": 3584,
        "stopped": "refused",
        "step_mib": 512,
        "error": "OutOfMemoryError: CUDA out of memory.",
    }
    values.update(fields)
    return TakeResult(**values)


SHARE_MIB = 3840
# name: (the run, verdict, limit held, process alive, words the note must hold)
ENDS = {
    "refused under the share": (
        TakerRun("torch", 0, result()),
        "held",
        True,
        True,
        "256 MiB under the share (93% of it used)",
    ),
    "refused exactly at the share": (
        TakerRun("torch", 0, result(got_mib=SHARE_MIB)),
        "held",
        True,
        True,
        "refused at the share",
    ),
    "refused past the share": (
        TakerRun("cupy", 0, result(framework="cupy", got_mib=4096)),
        "over",
        False,
        True,
        "took 256 MiB more",
    ),
    "stopped by the probe past the share": (
        TakerRun("torch", 0, result(got_mib=4352, stopped="exceeded", error="")),
        "over",
        False,
        True,
        "at least 512 MiB more",
    ),
    "refused its first step": (
        TakerRun("torch", 0, result(got_mib=0)),
        "broken",
        True,
        True,
        "refused its first 512 MiB",
    ),
    "failed after taking some": (
        TakerRun("torch", 0, result(stopped="error", error="RuntimeError: CUDA error")),
        "broken",
        False,
        False,
        "failed after 3584 MiB: RuntimeError",
    ),
    "killed by a signal after it reported": (
        TakerRun("jax", -11, result(framework="jax")),
        "died",
        False,
        False,
        "killed by SIGSEGV after taking 3584 MiB",
    ),
    "exited without a result": (
        TakerRun("tensorflow", 1, None, "Traceback\nImportError: libcudart.so.12\n"),
        "died",
        False,
        False,
        "exited 1 without a result: ImportError: libcudart.so.12",
    ),
    "printed a line that is no result": (
        TakerRun("torch", 0, None, unreadable="stopped must be one of"),
        "died",
        False,
        False,
        "without a result: stopped must be one of",
    ),
    "refused under the share, then exited badly": (
        TakerRun("torch", 3, result()),
        "died",
        True,
        False,
        "then exited 3",
    ),
    "ran past its time": (
        TakerRun("jax", None, None, seconds=300.0),
        "timed-out",
        False,
        False,
        "no result in 300 s",
    ),
    "fell back to the CPU at once": (
        TakerRun("jax", 0, result(framework="jax", got_mib=0, stopped="error", platform="cpu")),
        "off-gpu",
        False,
        False,
        "ran on cpu",
    ),
}


@pytest.mark.parametrize("end", ENDS)
def test_each_end_of_a_run_has_its_verdict(end: str) -> None:
    run, verdict, held, alive, words = ENDS[end]
    judgement = judge(run, SHARE_MIB)
    assert (judgement.verdict, judgement.held, judgement.alive) == (verdict, held, alive)
    assert words in judgement.note
    assert judgement.run is run
