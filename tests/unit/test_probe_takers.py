"""The taker's loop (webhook/probe/takers.py) with frameworks made up in-process, and the line it
prints (webhook/probe/take_result.py): what a child reports for each way a framework ends."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from webhook.probe.take_result import TakeResult, first_line, read_result
from webhook.probe.takers import FRAMEWORKS, Framework, main, take_memory


class Refused(Exception):
    """The made-up framework's out-of-memory error."""


@dataclass
class MadeUp(Framework):
    """A framework with `cap_mib` of memory, failing where it is told to."""

    cap_mib: int = 2048
    platform_name: str = "gpu"
    fail_on_load: Exception | None = None
    fail_on_take: Exception | None = None
    fail_on_figures: bool = False
    held_mib: int = 0
    name: str = "madeup"

    def load(self) -> str:
        if self.fail_on_load:
            raise self.fail_on_load
        return "1.0"

    def platform(self) -> str:
        return self.platform_name

    def take(self, mib: int) -> object:
        if self.fail_on_take:
            raise self.fail_on_take
        if self.held_mib + mib > self.cap_mib:
            raise Refused(f"out of memory\nwith {self.held_mib} MiB held")
        self.held_mib += mib
        return object()

    def is_refusal(self, error: Exception) -> bool:
        return isinstance(error, Refused)

    def total_mib(self) -> int | None:
        if self.fail_on_figures:
            raise RuntimeError("no figures")
        return 8192

    def limit_mib(self) -> int | None:
        return self.cap_mib


# name: (framework, got, stopped, error starts with, platform)
LOOPS = {
    "refused under the stop": (MadeUp(), 2048, "refused", "Refused: out of memory", "gpu"),
    "reaches the stop": (MadeUp(cap_mib=65536), 4096, "exceeded", "", "gpu"),
    "fails to import": (
        MadeUp(fail_on_load=ImportError("libcudart.so.13: cannot open")),
        0,
        "error",
        "ImportError: libcudart.so.13",
        "unknown",
    ),
    "an allocator key it does not know": (
        MadeUp(fail_on_take=ValueError("Unrecognized key 'x' in CUDA allocator config.")),
        0,
        "error",
        "ValueError: Unrecognized key 'x'",
        "gpu",
    ),
    "runs on the CPU": (MadeUp(platform_name="cpu"), 0, "error", "madeup runs on cpu", "cpu"),
}


@pytest.mark.parametrize("loop", LOOPS)
def test_the_loop_reports_how_the_framework_ended(loop: str) -> None:
    framework, got, stopped, error, platform = LOOPS[loop]
    result = take_memory(framework, step_mib=512, stop_mib=4096)
    assert (result.got_mib, result.stopped, result.platform) == (got, stopped, platform)
    assert result.error.startswith(error)
    assert "\n" not in result.error
    assert result.step_mib == 512


def test_the_loop_holds_every_step_it_took() -> None:
    framework = MadeUp(cap_mib=3000)
    result = take_memory(framework, step_mib=1000, stop_mib=10000)
    assert result.got_mib == framework.held_mib == 3000


def test_figures_that_cannot_be_read_do_not_turn_a_run_into_an_error() -> None:
    result = take_memory(MadeUp(fail_on_figures=True), step_mib=512, stop_mib=4096)
    assert (result.stopped, result.total_mib, result.limit_mib) == ("refused", None, 2048)


def test_the_seconds_come_from_the_clock() -> None:
    ticks = iter([10.0, 12.34])
    result = take_memory(MadeUp(), step_mib=512, stop_mib=4096, clock=lambda: next(ticks))
    assert result.seconds == 2.3


def test_every_framework_the_runner_knows_has_a_taker() -> None:
    from webhook.probe.runner import FRAMEWORKS as RUN

    assert set(RUN) == set(FRAMEWORKS)
    assert all(FRAMEWORKS[name]().name == name for name in FRAMEWORKS)


def test_the_taker_command_prints_one_result_line_when_the_framework_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # No tensorflow here: the import fails, and that is a result like any other.
    assert main(["tensorflow", "--stop-mib", "1024"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = TakeResult.from_mapping(json.loads(line))
    assert (result.framework, result.stopped, result.got_mib) == ("tensorflow", "error", 0)
    assert result.error.startswith("ModuleNotFoundError")


# The line ---------------------------------------------------------------------------------


def test_a_result_reads_back_from_its_line() -> None:
    result = TakeResult("jax", "0.11.2", 35328, "refused", 512, "RESOURCE_EXHAUSTED", None, 35790)
    assert read_result(result.line() + "\n") == result


@pytest.mark.parametrize(
    ("stdout", "found"),
    [
        ("", None),
        ("a framework's own words\n", None),
        ('{"not": "closed"\n', None),
        ("chatter\n{not json\n" + TakeResult("t", "1", 0, "error", 512).line() + "\n", "t"),
        (TakeResult("early", "1", 0, "error", 512).line() + "\n" + '{"x"', "early"),
    ],
    ids=["nothing", "no JSON", "a broken object", "after chatter", "before a broken line"],
)
def test_the_result_is_the_last_json_object_on_stdout(stdout: str, found: str | None) -> None:
    result = read_result(stdout)
    assert (result.framework if result else None) == found


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("[1, 2]", "not a JSON object"),
        ('{"framework": "t", "version": "1", "got_mib": 0, "stopped": "gave up"}', "stopped"),
        ('{"framework": "t", "version": "1", "got_mib": 0, "stopped": "error"}', "step_mib"),
        ('{"framework": "t", "version": "1", "got_mib": -1, "stopped": "error"}', "got_mib"),
        ('{"framework": "t", "version": "1", "got_mib": true, "stopped": "error"}', "got_mib"),
        ('{"framework": 3, "version": "1", "got_mib": 0, "stopped": "error"}', "framework"),
    ],
)
def test_a_line_that_is_no_result_says_which_field_is_wrong(line: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        TakeResult.from_mapping(json.loads(line))


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("", ""),
        ("\n\n  first  \nsecond", "first"),
        ("x" * 400, "x" * 297 + "..."),
    ],
    ids=["empty", "blank lines before", "too long"],
)
def test_an_error_is_kept_to_its_first_line_clipped(text: str, line: str) -> None:
    assert first_line(text) == line
