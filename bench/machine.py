"""The machine and the code a run measured, recorded beside its figures."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import wrk


def describe(repo: Path) -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "wrk": wrk.version(),
        "date": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "commit": _git(repo, "rev-parse", "--short", "HEAD"),
        # Others may be editing the tree while it is measured.
        "uncommitted_changes": bool(
            _git(repo, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no")
        ),
        "load_average": load_average(),
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float]:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return []


def _git(repo: Path, *args: str) -> str:
    try:
        completed = subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, check=False
        )
    except OSError:
        return ""
    return completed.stdout.strip()
