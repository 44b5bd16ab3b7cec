"""Running the takers: which frameworks this Python has, and one child process per framework,
one at a time, with the share's env and a time limit.

One at a time, because each holds what it took until it exits: two at once would share the card
and the share between them. A child that outlives its time limit is killed with its whole process
group (a framework's helper processes too), so that the next one starts on a free card.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import IO

from webhook.probe.take_result import TakerRun, read_result

FRAMEWORKS = ("torch", "jax", "cupy", "tensorflow")
# The child's command line, before its arguments: the same Python, the taker module.
TAKER = (sys.executable, "-m", "webhook.probe.take")
DEFAULT_TIMEOUT_S = 300.0
# The end of a child's stderr kept for the report: a framework's last words, not its log.
STDERR_TAIL_CHARS = 2000
# The directory that holds the webhook package, so that a child finds the same source.
SOURCE_ROOT = str(Path(__file__).resolve().parents[2])


def installed_frameworks(candidates: Sequence[str] = FRAMEWORKS) -> tuple[str, ...]:
    """The frameworks of `candidates` this Python can import, found without importing them
    (importing one would take the GPU in this process)."""
    found = []
    for name in candidates:
        try:
            if find_spec(name) is not None:
                found.append(name)
        except (ImportError, ValueError):
            continue
    return tuple(found)


def child_environment(
    extra: Mapping[str, str], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`base` (this process's environment) with the share's variables over it, and this source
    tree at the end of PYTHONPATH, so that the child runs the same taker."""
    env = dict(os.environ if base is None else base)
    env.update(extra)
    paths = [path for path in env.get("PYTHONPATH", "").split(os.pathsep) if path]
    if SOURCE_ROOT not in paths:
        paths.append(SOURCE_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_taker(
    framework: str,
    *,
    step_mib: int,
    stop_mib: int,
    env: Mapping[str, str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    program: Sequence[str] = TAKER,
) -> TakerRun:
    """Runs the taker of `framework` in a child with exactly `env`, and waits for it."""
    command = [*program, framework, "--step-mib", str(step_mib), "--stop-mib", str(stop_mib)]
    started = time.monotonic()
    # Files rather than pipes: a helper the framework left running would hold a pipe open, and
    # reading it to its end would wait for that helper, not for the child.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(
            command,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        returncode: int | None
        try:
            returncode = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = None
        except BaseException:
            # Interrupted (Ctrl-C): the child must not stay behind, holding the card.
            _kill_group(child)
            child.wait()
            raise
        # Whatever the child left in its group goes too: it would hold GPU memory while the
        # next framework takes its turn.
        _kill_group(child)
        child.wait()
        stdout, stderr = _text(out), _text(err)
    seconds = round(time.monotonic() - started, 1)
    result, unreadable = None, ""
    try:
        result = read_result(stdout)
    except ValueError as error:
        unreadable = str(error)
    return TakerRun(framework, returncode, result, stderr[-STDERR_TAIL_CHARS:], seconds, unreadable)


def run_all(
    frameworks: Sequence[str],
    *,
    step_mib: int,
    stop_mib: int,
    env: Mapping[str, str],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    program: Sequence[str] = TAKER,
    starting: Callable[[str], None] = lambda framework: None,
) -> list[TakerRun]:
    """Runs each framework's taker in turn; `starting` is told before each one starts."""
    runs = []
    for framework in frameworks:
        starting(framework)
        runs.append(
            run_taker(
                framework,
                step_mib=step_mib,
                stop_mib=stop_mib,
                env=env,
                timeout_s=timeout_s,
                program=program,
            )
        )
    return runs


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        child.kill()


def _text(file: IO[bytes]) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")
