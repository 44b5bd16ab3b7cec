"""Whether a share held, for one framework: a pure reading of a taker's run against the share's
MiB, and the one place the verdicts are defined.

A share holds for a framework when the framework was refused at or under the share and lived to
say so. Every other end is a failure of the share, each for its own reason: the framework took
more than the share (over), raised something other than its out-of-memory error (broken: the
env breaks the pod, as an allocator key the framework does not know does), was killed or exited
without a result (died: JAX aborts under an MPS limit its preallocation does not fit), ran on
the CPU instead of the GPU (off-gpu: JAX falls back silently when its GPU plugin fails), or gave
no answer in time (timed-out).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from webhook.probe.take_result import ON_GPU, UNKNOWN_PLATFORM, TakerRun, first_line

Verdict = Literal["held", "over", "broken", "died", "off-gpu", "timed-out"]
VERDICTS = ("held", "over", "broken", "died", "off-gpu", "timed-out")


@dataclass(frozen=True)
class Judgement:
    """`held`: the framework was refused at or under the share; `alive`: its process ended
    well, with a result and no error; `margin_mib`: the share less what it got (negative when
    over; for one the probe stopped, it took at least that much more); `run`: what was judged."""

    framework: str
    version: str
    verdict: Verdict
    held: bool
    alive: bool
    share_mib: int
    got_mib: int | None
    margin_mib: int | None
    note: str
    run: TakerRun

    @property
    def passed(self) -> bool:
        return self.verdict == "held"


def judge(run: TakerRun, share_mib: int) -> Judgement:
    result = run.result
    version = result.version if result else ""
    got = result.got_mib if result else None
    margin = share_mib - got if got is not None else None
    alive = (
        run.returncode == 0
        and result is not None
        and result.stopped != "error"
        and result.platform == ON_GPU
    )

    def verdict(name: Verdict, held: bool, note: str) -> Judgement:
        return Judgement(
            run.framework, version, name, held, alive, share_mib, got, margin, note, run
        )

    if run.timed_out:
        return verdict("timed-out", False, f"no result in {run.seconds:g} s: killed")
    if run.returncode is not None and run.returncode < 0:
        after = f" after taking {got} MiB" if got else ""
        return verdict("died", False, f"killed by {run.signal_name}{after}{_last_words(run)}")
    if result is None:
        why = f": {run.unreadable}" if run.unreadable else ""
        return verdict(
            "died", False, f"exited {run.returncode} without a result{why}{_last_words(run)}"
        )
    if result.platform not in (ON_GPU, UNKNOWN_PLATFORM):
        return verdict("off-gpu", False, f"ran on {result.platform}, not on the GPU")
    if result.stopped == "error":
        after = f" after {result.got_mib} MiB" if result.got_mib else " before taking any"
        return verdict("broken", False, f"failed{after}: {result.error}")
    if result.stopped == "exceeded" or result.got_mib > share_mib:
        least = "at least " if result.stopped == "exceeded" else ""
        return verdict(
            "over",
            False,
            f"took {least}{result.got_mib - share_mib} MiB more than the share: "
            "nothing refused it at the share",
        )
    if result.got_mib == 0 and share_mib >= result.step_mib:
        return verdict(
            "broken",
            True,
            f"refused its first {result.step_mib} MiB: the share gives it nothing ({result.error})",
        )
    where = f"{margin} MiB under the share" if margin else "at the share"
    note = f"refused {where} ({_percent(result.got_mib, share_mib)} of it used)"
    if run.returncode != 0:
        return verdict("died", True, f"{note}, then exited {run.returncode}")
    return verdict("held", True, note)


def holds(judgements: Iterable[Judgement]) -> bool:
    """Whether the share held for every framework judged (and at least one was)."""
    found = list(judgements)
    return bool(found) and all(judgement.passed for judgement in found)


def _percent(got: int, share: int) -> str:
    return f"{100 * got // share}%" if share else "-"


def _last_words(run: TakerRun) -> str:
    """The last line the child wrote on stderr, where it said anything."""
    lines = [line for line in run.stderr_tail.splitlines() if line.strip()]
    return f": {first_line(lines[-1])}" if lines else ""
