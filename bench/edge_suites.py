"""The hostile-client and rolling-restart suites against the serving edge and gunicorn's stock
workers, one after the other in one run: `python -m bench.edge_suites` (about five minutes).

The suites start the real server with the environment they are run in, so `WORKER` picks the
worker: the edge's (`keepalive`), gunicorn's threaded one (`gthread`) or its evented one
(`gevent`). Each suite's pass and failure counts are printed, with the figures its tests print
(the kept-alive p99 beside a crowd of hostile connections, the p99 of new connections beside
dripping ones), as a Markdown table for bench/README.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SUITES = ("tests/test_hostile_clients.py", "tests/test_rolling_restart.py")
WORKERS = {
    "the edge (keepalive)": "keepalive",
    "stock gthread": "gthread",
    "stock gevent": "gevent",
}
# What the suites print of their figures.
FIGURES = re.compile(r"^with .*$", re.MULTILINE)
SUMMARY = re.compile(r"=+ (.*) in [0-9.]+s")
# Long enough for the slowest suite on a loaded machine; a worker that hangs fails here.
TIMEOUT_SECONDS = 900


def run_suites(worker: str) -> tuple[str, list[str]]:
    environment = {**os.environ, "WORKER": worker}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *SUITES],
            cwd=REPO_ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT_SECONDS} s", []
    found = SUMMARY.findall(done.stdout)
    failed = re.findall(r"^FAILED (.+?)(?: - .*)?$", done.stdout, re.MULTILINE)
    outcome = found[-1] if found else f"exit {done.returncode}"
    names = [name.split("::")[-1] for name in failed]
    return outcome, [*FIGURES.findall(done.stdout), *(f"failed: {n}" for n in names)]


def main() -> int:
    rows = ["| worker | suites | figures and failures |", "|---|---|---|"]
    for label, worker in WORKERS.items():
        print(f"{label}: running {', '.join(SUITES)} with WORKER={worker}", flush=True)
        outcome, lines = run_suites(worker)
        print(f"  {outcome}", flush=True)
        for line in lines:
            print(f"  {line}", flush=True)
        rows.append(f"| {label} | {outcome} | {'<br>'.join(lines) or '-'} |")
    print("\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
