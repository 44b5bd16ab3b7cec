"""The hostile-client and rolling-restart suites against the serving edge and gunicorn's stock
workers, one after the other in one run: `python -m bench.edge_suites` (about eight minutes).

The suites start the real server with the environment they are run in, so settings pick the
server: the edge, the edge with one piece off (`CLIENT_STALL_SECONDS=0`, `FRONT=threads`), or
gunicorn's stock threaded or evented worker (`WORKER=gthread`, `WORKER=gevent`). Name some of
them (`python -m bench.edge_suites edge gevent`) to run only those. Each suite's pass and
failure counts are printed, with the figures its tests print (the kept-alive p99 beside a crowd
of hostile connections, the p99 of new connections beside dripping ones), as a Markdown table
for bench/README.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SUITES = ("tests/test_hostile_clients.py", "tests/test_rolling_restart.py")
# Each server the suites run against, by a short name: a label and the settings it differs by.
SERVERS: dict[str, tuple[str, dict[str, str]]] = {
    "edge": ("the edge", {}),
    "no-stall": ("the edge without its stall limits", {"CLIENT_STALL_SECONDS": "0"}),
    "threads": ("the edge without its evented front", {"FRONT": "threads"}),
    "gthread": ("stock gthread", {"WORKER": "gthread"}),
    "gevent": ("stock gevent", {"WORKER": "gevent"}),
}
# What the suites print of their figures.
FIGURES = re.compile(r"^with .*$", re.MULTILINE)
SUMMARY = re.compile(r"=+ (.*) in [0-9.]+s")
# Long enough for the slowest suite on a loaded machine; a worker that hangs fails here.
TIMEOUT_SECONDS = 900


def run_suites(settings: dict[str, str]) -> tuple[str, list[str]]:
    environment = {**os.environ, **settings}
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


def main(argv: list[str] | None = None) -> int:
    chosen = argv if argv is not None else sys.argv[1:]
    unknown = [name for name in chosen if name not in SERVERS]
    if unknown:
        print(f"edge_suites: unknown {', '.join(unknown)}; known: {', '.join(SERVERS)}")
        return 2
    rows = ["| server | suites | figures and failures |", "|---|---|---|"]
    for name in chosen or list(SERVERS):
        label, settings = SERVERS[name]
        shown = " ".join(f"{key}={value}" for key, value in settings.items()) or "defaults"
        print(f"{label}: running {', '.join(SUITES)} with {shown}", flush=True)
        outcome, lines = run_suites(settings)
        print(f"  {outcome}", flush=True)
        for line in lines:
            print(f"  {line}", flush=True)
        rows.append(f"| {label} | {outcome} | {'<br>'.join(lines) or '-'} |")
    print("\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
