"""The runner (webhook/probe/runner.py): the real taker in a real child process, on stand-ins for
PyTorch, JAX and CuPy that behave as the real ones did on an H200 (tests/fixtures/probe/), so
that the subprocess, its env, the time limit, a death by signal and the reading of the result
are all exercised without a GPU."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from webhook.probe.judge import judge
from webhook.probe.runner import (
    SOURCE_ROOT,
    child_environment,
    installed_frameworks,
    run_all,
    run_taker,
)

FAKES = Path(__file__).resolve().parents[1] / "fixtures" / "probe" / "fake-frameworks"
# The fake card has 8192 MiB; a quarter of it is the share.
SHARE_MIB = 2048
STEP_MIB = 512
STOP_MIB = SHARE_MIB + STEP_MIB
SHIPPED_ENV = {
    "XLA_CLIENT_MEM_FRACTION": "0.25",
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={SHARE_MIB}M",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
}


def env_with(**variables: str) -> dict[str, str]:
    """A child's env: only the fakes on its path, and `variables`."""
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(FAKES)}
    return child_environment(variables, base)


# framework, env: (verdict, got MiB)
CASES = {
    "torch ignores the shipped env": ("torch", SHIPPED_ENV, "over", STOP_MIB),
    "torch keeps to its allocator fraction": (
        "torch",
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,per_process_memory_fraction:0.25"},
        "held",
        2048,
    ),
    "torch breaks on an allocator key it does not know": (
        "torch",
        {"PYTORCH_CUDA_ALLOC_CONF": "throw_on_cudamalloc_oom:True"},
        "broken",
        0,
    ),
    "torch ignores the fraction under the async backend": (
        "torch",
        {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync,per_process_memory_fraction:0.25"},
        "over",
        STOP_MIB,
    ),
    "torch is held by an MPS daemon": (
        "torch",
        {**SHIPPED_ENV, "FAKE_MPS_DAEMON": "1"},
        "held",
        1536,
    ),
    "jax keeps to its fraction without MPS": ("jax", SHIPPED_ENV, "held", 2048),
    "jax aborts under an MPS limit its fraction fills": (
        "jax",
        {**SHIPPED_ENV, "FAKE_MPS_DAEMON": "1"},
        "died",
        None,
    ),
    "jax runs on the CPU with both fraction variables": (
        "jax",
        {**SHIPPED_ENV, "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.25"},
        "off-gpu",
        0,
    ),
    "cupy ignores the shipped env": ("cupy", SHIPPED_ENV, "over", STOP_MIB),
    "cupy keeps to its memory limit": ("cupy", {"CUPY_GPU_MEMORY_LIMIT": "25%"}, "held", 2048),
    "no GPU for cupy": ("cupy", {"FAKE_GPU_ABSENT": "1"}, "broken", 0),
}


@pytest.mark.parametrize("case", CASES)
def test_a_framework_run_in_a_child_is_judged_as_the_card_would_show(case: str) -> None:
    framework, variables, verdict, got = CASES[case]
    run = run_taker(
        framework, step_mib=STEP_MIB, stop_mib=STOP_MIB, env=env_with(**variables), timeout_s=60
    )
    judgement = judge(run, SHARE_MIB)
    assert (judgement.verdict, judgement.got_mib) == (verdict, got), judgement.note
    if run.result is not None:
        assert run.result.framework == framework
        assert run.result.version.endswith("+fake")


def test_a_child_killed_by_a_signal_is_reported_with_the_signal_and_its_last_words() -> None:
    run = run_taker(
        "torch",
        step_mib=STEP_MIB,
        stop_mib=STOP_MIB,
        env=env_with(FAKE_GPU_BEHAVIOUR="abort"),
        timeout_s=60,
    )
    assert (run.returncode, run.signal_name, run.result) == (-6, "SIGABRT", None)
    assert "Check failed" in run.stderr_tail
    assert "killed by SIGABRT: F0000 fake_allocator.cc:1] Check failed" in judge(run, 2048).note


def test_a_child_past_its_time_limit_is_killed_and_reported() -> None:
    run = run_taker(
        "cupy",
        step_mib=STEP_MIB,
        stop_mib=STOP_MIB,
        env=env_with(FAKE_GPU_BEHAVIOUR="hang"),
        timeout_s=1,
    )
    assert run.timed_out and run.result is None
    assert run.seconds < 30
    assert judge(run, SHARE_MIB).verdict == "timed-out"


def test_a_child_that_exits_without_a_result_is_reported_with_its_code() -> None:
    run = run_taker(
        "torch",
        step_mib=STEP_MIB,
        stop_mib=STOP_MIB,
        env=env_with(FAKE_GPU_BEHAVIOUR="exit"),
        timeout_s=60,
    )
    assert (run.returncode, run.result, run.signal_name) == (3, None, "")
    assert judge(run, SHARE_MIB).note.startswith("exited 3 without a result")


def test_lines_a_framework_prints_on_stdout_do_not_hide_the_result() -> None:
    run = run_taker(
        "torch",
        step_mib=STEP_MIB,
        stop_mib=STOP_MIB,
        env=env_with(
            FAKE_GPU_BEHAVIOUR="chatter", PYTORCH_CUDA_ALLOC_CONF="per_process_memory_fraction:0.25"
        ),
        timeout_s=60,
    )
    assert run.result is not None and run.result.stopped == "refused"


def test_frameworks_run_one_after_the_other_each_announced() -> None:
    started: list[str] = []
    runs = run_all(
        ["torch", "cupy"],
        step_mib=STEP_MIB,
        stop_mib=STOP_MIB,
        env=env_with(CUPY_GPU_MEMORY_LIMIT="25%"),
        timeout_s=60,
        starting=started.append,
    )
    assert started == ["torch", "cupy"]
    assert [run.framework for run in runs] == ["torch", "cupy"]
    # Each child has a card of its own: what torch held was gone when cupy started.
    assert [judge(run, SHARE_MIB).verdict for run in runs] == ["over", "held"]


def test_the_child_program_can_be_another_one() -> None:
    program = (sys.executable, "-c", "import sys; print(sys.argv[1:])")
    run = run_taker("torch", step_mib=1, stop_mib=2, env=env_with(), program=program)
    assert (run.returncode, run.result) == (0, None)


# Which frameworks, and the child's env --------------------------------------------------


def test_installed_frameworks_are_found_without_importing_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(FAKES))
    found = installed_frameworks()
    assert found == ("torch", "jax", "cupy")
    assert not {"torch", "jax", "cupy", "_fake_gpu"} & set(sys.modules)


def test_a_framework_that_is_not_there_is_not_found() -> None:
    assert installed_frameworks(("no_such_framework_here",)) == ()


@pytest.mark.parametrize(
    ("base", "extra", "variables", "path"),
    [
        ({"A": "1"}, {}, {"A": "1"}, [SOURCE_ROOT]),
        ({"A": "1"}, {"A": "2", "B": "3"}, {"A": "2", "B": "3"}, [SOURCE_ROOT]),
        ({"PYTHONPATH": "/opt/x"}, {}, {}, ["/opt/x", SOURCE_ROOT]),
        ({"PYTHONPATH": f"{SOURCE_ROOT}:/opt/x"}, {}, {}, [SOURCE_ROOT, "/opt/x"]),
    ],
    ids=["base kept", "the share's over the base", "source after the user's", "source once"],
)
def test_the_child_env_is_the_base_with_the_share_over_it_and_this_source_on_its_path(
    base: dict[str, str], extra: dict[str, str], variables: dict[str, str], path: list[str]
) -> None:
    env = child_environment(extra, base)
    assert env.pop("PYTHONPATH").split(os.pathsep) == path
    assert env == variables


def test_a_helper_the_child_leaves_behind_neither_delays_the_verdict_nor_outlives_it(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "helper-alive"
    helper = f"import time; time.sleep(1); open({str(marker)!r}, 'w')"
    child = (
        "import json, subprocess, sys;"
        # A helper that inherits stdout and stderr, as a framework's compiler daemon may.
        f"subprocess.Popen([sys.executable, '-c', {helper!r}]);"
        "print(json.dumps({'framework': 'torch', 'version': 'x', 'got_mib': 1024,"
        " 'stopped': 'refused', 'step_mib': 512}))"
    )
    started = time.monotonic()
    run = run_taker(
        "torch",
        step_mib=512,
        stop_mib=2048,
        env=env_with(),
        timeout_s=10,
        program=(sys.executable, "-c", child, "--"),
    )
    assert time.monotonic() - started < 2
    assert judge(run, 2048).verdict == "held"
    time.sleep(1.5)
    assert not marker.exists(), "the helper outlived the probe of its framework"
