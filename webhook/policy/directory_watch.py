"""Noticing that the policy directory changed, by polling a cheap fingerprint of it, and
telling a file that stopped changing from one still being written.

Polling rather than inotify: it needs no extra dependency, it sees through the symlinks of a
mounted ConfigMap (kubelet swaps the `..data` link with a rename, which inotify on the visible
names never reports), and ConfigMap updates take tens of seconds to reach a pod anyway.

A file rewritten in place passes through every length on the way: a writer that pauses
mid-file leaves a half that may still parse, and comparing what was read before and after a
load does not see a writer that is paused. So a plain file is read only once its identity has
stayed the same for SETTLE_SECONDS. A file that a mounted ConfigMap publishes needs no wait:
kubelet writes a new timestamped folder and swaps the `..data` link to it with a rename, so
the link shows a whole set or the one before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from webhook.file_identity import FileIdentity, file_identity
from webhook.periodically import Periodically
from webhook.policy.loader import POLICY_FILE_SUFFIXES

CONFIGMAP_DATA_LINK = "..data"

# How long a plain policy file must keep its size, mtime and inode before it is read. A policy
# file is a few KB that a writer puts down in one or a few writes within milliseconds; a
# writer that is descheduled, flushes a buffer at a time or copies over a network pauses for
# tens to hundreds of milliseconds, and 0.5 s outlasts those. It is paid once per in-place edit
# (on top of the poll interval, 1 s by default) and once at startup, and never for a mounted
# ConfigMap. A writer that pauses longer still can be read half-way: write elsewhere and
# rename into place to be safe from any wait. Read when used, so tests can lower it.
SETTLE_SECONDS = 0.5


@dataclass(frozen=True)
class PolicyFileSeen:
    """One policy file as seen through its symlinks; `error` when it cannot be looked at.
    `published` when it is a link into a ConfigMap's `..data`, which changes only whole."""

    name: str
    identity: FileIdentity | None = None
    error: str = ""
    published: bool = False


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
    published = data_link is not None
    return Fingerprint(data_link, tuple(_identity(directory, name, published) for name in names))


def _identity(directory: Path, name: str, in_configmap: bool) -> PolicyFileSeen:
    path = directory / name
    published = in_configmap and _links_into_data(path)
    try:
        return PolicyFileSeen(name, file_identity(path), published=published)
    except OSError as error:
        return PolicyFileSeen(
            name, error=f"{type(error).__name__}: {error.strerror}", published=published
        )


def _links_into_data(path: Path) -> bool:
    """Whether `path` is a link kubelet made: `<name> -> ..data/<name>`."""
    try:
        target = os.readlink(path)
    except OSError:  # not a link
        return False
    return Path(target).parts[:1] == (CONFIGMAP_DATA_LINK,)


class Settling:
    """When each plain policy file was first seen as it is now.

    One per reader of a directory (a policy store), since it remembers between looks: a file
    unchanged since an earlier look needs no further wait."""

    def __init__(self) -> None:
        self._since: dict[str, tuple[PolicyFileSeen, float]] = {}

    def look(self, fingerprint: Fingerprint) -> float:
        """Take in what `fingerprint` shows; the seconds to wait before every plain file in it
        has been seen unchanged for SETTLE_SECONDS, 0 when they all have. Published files
        (a ConfigMap's) never wait."""
        now = time.monotonic()
        since: dict[str, tuple[PolicyFileSeen, float]] = {}
        wait = 0.0
        for seen in fingerprint.files:
            if seen.published:
                continue
            earlier = self._since.get(seen.name)
            first = earlier[1] if earlier is not None and earlier[0] == seen else now
            since[seen.name] = (seen, first)
            wait = max(wait, first + SETTLE_SECONDS - now)
        self._since = since
        return wait


def changed_plain_files(before: Fingerprint, after: Fingerprint) -> tuple[str, ...]:
    """The plain (not published) files of `after` that are new or differ from `before`."""
    earlier = {seen.name: seen for seen in before.files}
    return tuple(
        seen.name for seen in after.files if not seen.published and earlier.get(seen.name) != seen
    )


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
