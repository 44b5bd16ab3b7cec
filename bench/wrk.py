"""wrk runs, through the Lua scripts beside this file, and the result line each prints."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Literal

BENCH_DIR = Path(__file__).resolve().parent
SATURATION_SCRIPT = BENCH_DIR / "post.lua"
FIXED_RATE_SCRIPT = BENCH_DIR / "fixed_rate.lua"
WRK = "wrk"
MARKER = "BENCH_RESULT "
SATURATION_THREADS = 2
SATURATION_CONNECTIONS = 4
FIXED_RATE_THREADS = 4
# The kube-apiserver gives up on a webhook after the timeout it sends (5 s for our captures).
TIMEOUT = "5s"

Mode = Literal["kept-alive", "new-connection"]
MODES: tuple[Mode, ...] = ("kept-alive", "new-connection")


class WrkError(Exception):
    pass


def saturation(url: str, body_file: Path, mode: Mode, seconds: int) -> dict[str, Any]:
    """As many admissions as SATURATION_CONNECTIONS connections carry in `seconds`."""
    args = [f"-t{SATURATION_THREADS}", f"-c{SATURATION_CONNECTIONS}", "-s", str(SATURATION_SCRIPT)]
    return _run(args, url, seconds, _env(body_file, mode))


def fixed_rate(url: str, body_file: Path, mode: Mode, rate: int, seconds: int) -> dict[str, Any]:
    """`rate` admissions a second on FIXED_RATE_THREADS connections, latency from schedule."""
    threads = FIXED_RATE_THREADS
    args = [f"-t{threads}", f"-c{threads}", "-s", str(FIXED_RATE_SCRIPT)]
    env = _env(body_file, mode) | {"BENCH_RATE": str(rate), "BENCH_THREADS": str(threads)}
    return _run(args, url, seconds, env)


def _env(body_file: Path, mode: Mode) -> dict[str, str]:
    env = {"BENCH_BODY": str(body_file.resolve())}
    if mode == "new-connection":
        env["BENCH_CONNECTION"] = "close"
    return env


def _run(args: list[str], url: str, seconds: int, env: dict[str, str]) -> dict[str, Any]:
    command = [WRK, *args, f"-d{seconds}s", f"--timeout={TIMEOUT}", f"{url}/mutate"]
    try:
        completed = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=os.environ | env,
            timeout=seconds + 60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise WrkError(f"{' '.join(command)} did not finish in {seconds + 60} s") from None
    try:
        result = parse_result(completed.stdout)
    except (ValueError, KeyError) as error:
        message = f"{' '.join(command)} printed a result that does not read: {error}"
        raise WrkError(message) from None
    if result is None:
        output = (completed.stdout + completed.stderr).strip()[-2000:]
        raise WrkError(
            f"{' '.join(command)} printed no result (exit {completed.returncode}):\n{output}"
        )
    return result


def parse_result(output: str) -> dict[str, Any] | None:
    """The result line of a run, normalised: `errors` by kind and their total in `error_count`
    (for a fixed-rate run, answers that are not 2xx and requests lost to a broken connection
    count too; its `non2xx` replaces wrk's `status`, which counts only 4xx and 5xx)."""
    lines = [line for line in output.splitlines() if line.startswith(MARKER)]
    if not lines:
        return None
    raw = json.loads(lines[-1][len(MARKER) :])
    errors = {kind: int(count) for kind, count in raw.pop("errors").items()}
    if raw["mode"] == "fixed-rate":
        errors.pop("status", None)
        errors["non2xx"] = int(raw.pop("non2xx"))
        errors["lost"] = int(raw.pop("lost"))
    raw["latency_ms"] = {key: raw["latency_ms"].get(key) for key in ("p50", "p90", "p99", "max")}
    return raw | {"errors": errors, "error_count": sum(errors.values())}


def version() -> str:
    """wrk's version line, e.g. `wrk debian/4.1.0-3+b2 [epoll]`."""
    try:
        completed = subprocess.run([WRK, "-v"], capture_output=True, text=True, check=False)
    except OSError:
        return "not found"
    first = (completed.stdout or completed.stderr).splitlines()[:1]
    return first[0].split(" Copyright")[0].strip() if first else "unknown"
