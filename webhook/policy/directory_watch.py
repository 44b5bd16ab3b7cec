"""Noticing that the policy directory changed, by polling a cheap fingerprint of it.

Polling rather than inotify: it needs no extra dependency, it sees through the symlinks of a
mounted ConfigMap (kubelet swaps the `..data` link with a rename, which inotify on the visible
names never reports), and ConfigMap updates take tens of seconds to reach a pod anyway.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from webhook.file_identity import FileIdentity, file_identity
from webhook.periodically import Periodically
from webhook.policy.loader import POLICY_FILE_SUFFIXES

CONFIGMAP_DATA_LINK = "..data"


@dataclass(frozen=True)
class PolicyFileSeen:
    """One policy file as seen through its symlinks; `error` when it cannot be looked at."""

    name: str
    identity: FileIdentity | None = None
    error: str = ""


@dataclass(frozen=True)
class Fingerprint:
    data_link: str | None
    files: tuple[PolicyFileSeen, ...]
    error: str = ""


def directory_fingerprint(directory: Path) -> Fingerprint:
    """What a change to the policy files changes: their names, and their sizes, mtimes and
    inodes after following symlinks, plus where a ConfigMap's `..data` link points. Reads no
    file content and never raises."""
    try:
        data_link: str | None = os.readlink(directory / CONFIGMAP_DATA_LINK)
    except OSError:
        data_link = None
    try:
        names = sorted(
            entry.name
            for entry in os.scandir(directory)
            if not entry.name.startswith(".") and entry.name.endswith(POLICY_FILE_SUFFIXES)
        )
    except OSError as error:
        return Fingerprint(data_link, (), error=f"{type(error).__name__}: {error.strerror}")
    return Fingerprint(data_link, tuple(_identity(directory, name) for name in names))


def _identity(directory: Path, name: str) -> PolicyFileSeen:
    try:
        return PolicyFileSeen(name, file_identity(directory / name))
    except OSError as error:
        return PolicyFileSeen(name, error=f"{type(error).__name__}: {error.strerror}")


class DirectoryWatcher:
    """Calls `on_change` when the directory's fingerprint differs from the one last taken in.

    `on_change` returns whether it took the change in; when it returns False (the directory
    was changing under it), the next poll tries again. The first poll always calls it.
    """

    def __init__(
        self, directory: Path, interval_seconds: float, on_change: Callable[[], bool]
    ) -> None:
        self.directory = directory
        self.interval_seconds = interval_seconds
        self._on_change = on_change
        self._seen: Fingerprint | None = None
        self._periodic: Periodically | None = None

    def poll(self) -> bool:
        """One look at the directory; True when it had changed. Exceptions propagate."""
        current = directory_fingerprint(self.directory)
        if current == self._seen:
            return False
        if self._on_change():
            self._seen = current
        return True

    def start(self) -> None:
        self._periodic = Periodically(
            self.interval_seconds,
            self.poll,
            f"watching the policy directory {self.directory}",
            thread_name="policy-watcher",
            last_act=False,
        )
        self._periodic.start()

    def stop(self, timeout: float | None = None) -> None:
        if self._periodic is not None:
            self._periodic.stop(timeout)
