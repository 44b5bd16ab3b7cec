"""One probe from start to exit code, shared by `python -m webhook.probe run` and
`gpu-admission probe`: check that there is a GPU, run each framework's taker with the share's
env, judge each run, print the report.

Exit codes: 0 the share held for every framework, each process alive; 1 it did not hold for one
(over the share, died, broken, off the GPU, or timed out); 2 nothing was measured: no NVIDIA
GPU here, no framework to probe, or a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from webhook.probe import report
from webhook.probe.gpu import missing_gpu
from webhook.probe.judge import holds, judge
from webhook.probe.runner import (
    DEFAULT_TIMEOUT_S,
    FRAMEWORKS,
    TAKER,
    child_environment,
    installed_frameworks,
    run_all,
)
from webhook.probe.share import Share, read_env_file
from webhook.probe.takers import positive_int

HOLDS = 0
DOES_NOT_HOLD = 1
CANNOT_PROBE = 2
DEFAULT_STEP_MIB = 512


class CannotProbe(Exception):
    """Nothing can be measured here, for the reason in the message (exit 2)."""


@dataclass(frozen=True)
class RunOptions:
    """`frameworks`: None for every installed one; `env_file`: variables over the share's."""

    frameworks: tuple[str, ...] | None = None
    step_mib: int = DEFAULT_STEP_MIB
    timeout_s: float = DEFAULT_TIMEOUT_S
    as_json: bool = False
    env_file: Path | None = None
    # The taker's command line before its arguments: tests put a fake one here.
    program: Sequence[str] = field(default=TAKER)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run, the same in both commands."""
    parser.add_argument(
        "--frameworks",
        type=framework_list,
        metavar="NAME,...",
        help=f"which to probe, of {', '.join(FRAMEWORKS)} (default: every one installed)",
    )
    parser.add_argument(
        "--step-mib",
        type=positive_int,
        default=DEFAULT_STEP_MIB,
        metavar="MIB",
        help=f"how much each framework takes at a time (default: {DEFAULT_STEP_MIB})",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"how long one framework may take (default: {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--env-file",
        type=Path,
        metavar="FILE",
        help="NAME=VALUE lines given to the frameworks over the share's env (to try a setting)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_options(args: argparse.Namespace) -> RunOptions:
    return RunOptions(args.frameworks, args.step_mib, args.timeout, args.json, args.env_file)


def probe(
    share: Share,
    options: RunOptions,
    *,
    stdout: TextIO,
    stderr: TextIO,
    find_missing_gpu: Callable[[], str | None] = missing_gpu,
    base_env: Mapping[str, str] | None = None,
) -> int:
    """Measures `share` with each framework; the exit code. CannotProbe when nothing can be
    measured; ShareError when the env file does not read."""
    if options.step_mib > share.mib:
        raise CannotProbe(
            f"--step-mib {options.step_mib} is more than the share of {share.mib} MiB: "
            "a step must fit inside it"
        )
    env = dict(share.env)
    if options.env_file is not None:
        env.update(read_env_file(options.env_file))
    missing = find_missing_gpu()
    if missing:
        raise CannotProbe(missing)
    frameworks = _frameworks(options.frameworks)
    stop_mib = share.mib + options.step_mib

    def starting(framework: str) -> None:
        stderr.write(
            f"{framework}: taking {options.step_mib} MiB at a time, up to {stop_mib} MiB "
            f"(the share and one step more)\n"
        )
        stderr.flush()

    runs = run_all(
        frameworks,
        step_mib=options.step_mib,
        stop_mib=stop_mib,
        env=child_environment(env, base_env),
        timeout_s=options.timeout_s,
        program=options.program,
        starting=starting,
    )
    judgements = [judge(run, share.mib) for run in runs]
    if options.as_json:
        stdout.write(report.document(share, env, judgements))
    else:
        stdout.write(report.table(share, env, judgements))
    stdout.flush()
    return HOLDS if holds(judgements) else DOES_NOT_HOLD


def framework_list(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in FRAMEWORKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: name frameworks of {', '.join(FRAMEWORKS)}, separated by commas"
        )
    return names


def _frameworks(wanted: tuple[str, ...] | None) -> tuple[str, ...]:
    if wanted is None:
        found = installed_frameworks()
        if not found:
            raise CannotProbe(
                f"no framework to probe: none of {', '.join(FRAMEWORKS)} can be imported by "
                f"{sys.executable}"
            )
        return found
    found = installed_frameworks(wanted)
    absent = [name for name in wanted if name not in found]
    if absent:
        raise CannotProbe(f"{', '.join(absent)}: not installed for {sys.executable}")
    return wanted


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value
