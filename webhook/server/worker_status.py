"""Each worker's readiness details, kept where the master's metrics port reads them.

The admission port answers `/readyz` with its status alone: any client that reaches it may ask,
and the policy digest, the worker's pid and a failed load's file paths are for operators. So
each worker writes those details to a file of its own in the state directory whenever they
change (a policy reload, a failure), and the metrics port's `/status`, in the master, shows
every live worker's file at once. The master removes a worker's file when it exits.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from webhook import __version__
from webhook.policy.store import ReloadResult, ReloadStatus, ServedSet
from webhook.server.log_format import rfc3339

log = logging.getLogger("webhook")

STATUS_DIR = "status"


def readiness(current: ServedSet, status: ReloadStatus, interval_seconds: float) -> dict[str, Any]:
    """What a worker serves and how its reloads went."""
    failure = status.last_failure
    return {
        "status": "ready",
        "version": __version__,
        "policies": [policy.name for policy in current.policy_set.policies],
        "policySet": {
            "digest": current.digest,
            "loadedAt": rfc3339(current.loaded_at.timestamp()),
            "source": current.source,
        },
        "reload": {
            "intervalSeconds": interval_seconds,
            "reloads": status.reloads,
            "failures": status.failures,
            "failing": status.failing,
            "lastFailure": None
            if failure is None
            else {"at": rfc3339(failure.at.timestamp()), "problems": list(failure.problems)},
        },
        "worker": os.getpid(),
    }


class WorkerStatusFile:
    """A policy store's observer that keeps this worker's readiness in `state_dir`."""

    def __init__(self, state_dir: Path, interval_seconds: float) -> None:
        self._directory = state_dir / STATUS_DIR
        self._interval_seconds = interval_seconds
        self._written = ""

    def policies_observed(
        self, result: ReloadResult | None, current: ServedSet, status: ReloadStatus
    ) -> None:
        text = json.dumps(readiness(current, status, self._interval_seconds))
        if text == self._written:
            return
        self._directory.mkdir(exist_ok=True)
        path = self._directory / f"{os.getpid()}.json"
        partial = path.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(path)  # a reader sees the old details or the new, never half of them
        self._written = text


def every_worker(state_dir: Path) -> bytes:
    """`{"workers": [...]}`: the details of every worker with a file, in pid order."""
    workers = []
    for path in sorted((state_dir / STATUS_DIR).glob("*.json"), key=lambda p: int(p.stem)):
        try:
            workers.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # a worker gone since the listing
    return json.dumps({"workers": workers}, indent=2).encode() + b"\n"


def forget_worker(state_dir: Path, pid: int) -> None:
    (state_dir / STATUS_DIR / f"{pid}.json").unlink(missing_ok=True)
