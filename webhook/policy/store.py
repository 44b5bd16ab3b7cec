"""The policy set a process serves, how it got it, and how reloading it has gone.

Requests read `store.current` and nothing else: one attribute read of an immutable value, no
lock and no I/O. A reload builds a whole new set beside it and swaps the reference only when
every file loaded; a set that does not load never replaces the one serving.

Nothing is read mid-write: a plain file is read only once it has kept its identity for
SETTLE_SECONDS (directory_watch.py), and a load counts only if the files are as they were
before it, by identity and by content. A file still being written is held back, the set
serving keeps serving, and the next poll looks again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

from webhook.policy import directory_watch
from webhook.policy.directory_watch import (
    DirectoryWatcher,
    Fingerprint,
    Settling,
    changed_plain_files,
    directory_fingerprint,
)
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError, PolicyProblem
from webhook.policy.snapshot import LastGood, PolicyFiles, Snapshot

log = logging.getLogger("webhook")

Source = Literal["directory", "last-good snapshot", "given"]
ReloadResult = Literal["success", "failure"]
ReloadOutcome = Literal["reloaded", "failed", "unchanged", "unsettled"]

# How long a load at startup waits for files that keep being written before it gives up on
# them: ten settle intervals. A policy file is a few KB; a writer still at it after this is
# stuck or looping, and a worker that blocks much longer risks gunicorn's boot timeout.
STARTUP_PATIENCE_SECONDS = 5.0


@dataclass(frozen=True)
class ServedSet:
    policy_set: PolicySet
    digest: str | None  # None for a set handed in rather than read from files
    loaded_at: datetime
    source: Source


@dataclass(frozen=True)
class ReloadFailure:
    at: datetime
    problems: tuple[str, ...]  # each `file:line: field: message`


@dataclass(frozen=True)
class ReloadStatus:
    reloads: int = 0  # successful loads that replaced the set, the first load not counted
    failures: int = 0  # attempts at loading the directory that failed, the first one counted
    failing: bool = False  # the directory's current content does not load
    last_failure: ReloadFailure | None = None


class ReloadObserver(Protocol):
    def policies_observed(
        self, result: ReloadResult | None, current: ServedSet, status: ReloadStatus
    ) -> None:
        """Called after the first load and after every reload attempt; `result` is None for
        the first load and when the directory went back to the set already serving."""
        ...


class DirectoryChanged(Exception):
    """The directory changed while it was being loaded: what loaded may be a mix, or a file
    read half-way. `changing` names the plain files that were written meanwhile."""

    def __init__(self, directory: Path, changing: tuple[str, ...] = ()) -> None:
        super().__init__(str(directory))
        self.changing = changing


@dataclass(frozen=True)
class Attempt:
    """One load of a directory: the files as read, and the set or the problems."""

    files: PolicyFiles
    observed_at: float
    policy_set: PolicySet | None
    problems: tuple[PolicyProblem, ...]
    # False when files were still being written: `files` is then no content to skip later.
    settled: bool = True


def load_directory(
    directory: Path, files: PolicyFiles | None = None, settled_as: Fingerprint | None = None
) -> Attempt:
    """Load `directory`, whose files were just read as `files`. Raises DirectoryChanged when
    the files differ after the load from what was read before it, or when their fingerprint
    differs from `settled_as`, the one taken when they were found settled (so a writer that
    started after that and paused is caught). It does not wait for files to settle:
    load_settled_directory does."""
    before = files if files is not None else PolicyFiles.read(directory)
    policy_set: PolicySet | None = None
    problems: tuple[PolicyProblem, ...] = ()
    try:
        policy_set = PolicySet.load(directory)
    except PolicyLoadError as error:
        problems = error.problems
    except Exception as error:
        log.exception("loading the policies in %s failed unexpectedly", directory)
        problems = (_directory_problem(directory, f"the loader failed: {error!r}"),)
    observed_at = time.time()
    if settled_as is not None:
        after = directory_fingerprint(directory)
        if after != settled_as:
            raise DirectoryChanged(directory, changed_plain_files(settled_as, after))
    if PolicyFiles.read(directory).digest != before.digest:
        raise DirectoryChanged(directory)
    return Attempt(before, observed_at, policy_set, problems)


def settle(directory: Path, settling: Settling) -> tuple[Fingerprint, tuple[str, ...]]:
    """Wait until every plain policy file has kept its identity for SETTLE_SECONDS (as far as
    `settling` has seen; published files never wait). Returns the fingerprint then and the
    plain files that changed during the wait, which are still being written. Reads no file
    content."""
    before = directory_fingerprint(directory)
    wait = settling.look(before)
    if wait <= 0:
        return before, ()
    time.sleep(wait)
    after = directory_fingerprint(directory)
    settling.look(after)
    return after, changed_plain_files(before, after)


def load_settled_directory(directory: Path, settling: Settling | None = None) -> Attempt:
    """Load `directory` once its files have settled: at once for a mounted ConfigMap, after
    SETTLE_SECONDS for plain files, and longer while some are being written, up to
    STARTUP_PATIENCE_SECONDS; then the files still changing are the attempt's problem."""
    settling = settling if settling is not None else Settling()
    give_up_at = time.monotonic() + STARTUP_PATIENCE_SECONDS
    while True:
        settled, changing = settle(directory, settling)
        if not changing:
            try:
                return load_directory(directory, settled_as=settled)
            except DirectoryChanged as changed:
                changing = changed.changing
        if time.monotonic() >= give_up_at:
            problem = _directory_problem(
                directory,
                f"{_still_written(changing)} after {STARTUP_PATIENCE_SECONDS:g} s (a file is "
                f"read once it has stayed unchanged for {directory_watch.SETTLE_SECONDS:g} s)",
            )
            return Attempt(
                PolicyFiles.read(directory), time.time(), None, (problem,), settled=False
            )
        if changing:
            log.info("policies in %s: %s; waiting", directory, _still_written(changing))


def _still_written(names: tuple[str, ...]) -> str:
    if not names:
        return "the directory is still changing"
    verb = "is" if len(names) == 1 else "are"
    return f"{', '.join(names)} {verb} still being written"


def _directory_problem(directory: Path, message: str) -> PolicyProblem:
    return PolicyProblem(str(directory), None, "(directory)", message)


def _load_snapshot(last_good: LastGood | None) -> Snapshot | None:
    if last_good is None:
        return None
    try:
        return last_good.load()
    except PolicyLoadError as error:
        log.warning("the last good policy set in %s does not load: %s", last_good.state_dir, error)
        return None


def _now() -> datetime:
    return datetime.now(UTC)


class PolicyStore:
    """Holds the serving set of one process and reloads it from its directory."""

    def __init__(
        self,
        directory: Path,
        current: ServedSet,
        *,
        last_good: LastGood | None = None,
        observers: Sequence[ReloadObserver] = (),
        settling: Settling | None = None,
    ) -> None:
        self.directory = directory
        self.current = current
        self.status = ReloadStatus()
        self.last_good = last_good
        self._observers = tuple(observers)
        self._failed_digest: str | None = None
        self._reloading = threading.Lock()
        # What the files looked like at earlier looks, and since when.
        self._settling = settling if settling is not None else Settling()

    @classmethod
    def given(cls, policy_set: PolicySet, directory: Path) -> PolicyStore:
        """A store that serves `policy_set` as handed in, for embedding and tests."""
        return cls(directory, ServedSet(policy_set, None, _now(), "given"))

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        last_good: LastGood | None = None,
        observers: Sequence[ReloadObserver] = (),
    ) -> PolicyStore:
        """Load `directory`; when it does not load, serve the last good snapshot and record the
        failure. Raises PolicyLoadError when there is no snapshot to fall back on either."""
        settling = Settling()
        attempt = load_settled_directory(directory, settling)
        if attempt.policy_set is not None:
            served = ServedSet(attempt.policy_set, attempt.files.digest, _now(), "directory")
            store = cls(
                directory, served, last_good=last_good, observers=observers, settling=settling
            )
            store._keep(attempt)
            store._notify(None)
            return store
        snapshot = _load_snapshot(last_good)
        if snapshot is None:
            raise PolicyLoadError(attempt.problems)
        served = ServedSet(snapshot.policy_set, snapshot.files.digest, _now(), "last-good snapshot")
        store = cls(directory, served, last_good=last_good, observers=observers, settling=settling)
        store._record_failure(attempt, first=True)
        store._notify(None)
        return store

    def reload(self) -> ReloadOutcome:
        """Look at the directory once and load it if its content is new. Never raises for a
        policy that does not load; requests keep reading whatever set is current. Plain files
        changed since the last look are first given SETTLE_SECONDS; "unsettled" when some were
        still being written (or changed during the load), and nothing was taken."""
        with self._reloading:
            settled, changing = settle(self.directory, self._settling)
            if changing:
                self._hold_back(changing)
                return "unsettled"
            files = PolicyFiles.read(self.directory)
            if files.digest == self.current.digest and self.current.source == "directory":
                if self.status.failing:
                    # The directory went back to the set that serves.
                    self._failed_digest = None
                    self.status = replace(self.status, failing=False)
                    log.info("the policies in %s load again; nothing changed", self.directory)
                    self._notify(None)
                return "unchanged"
            if files.digest == self._failed_digest:
                return "unchanged"
            try:
                attempt = load_directory(self.directory, files, settled)
            except DirectoryChanged as changed:
                self._hold_back(changed.changing)
                return "unsettled"
            if attempt.policy_set is None:
                self._record_failure(attempt, first=False)
                self._notify("failure")
                return "failed"
            self.current = ServedSet(attempt.policy_set, files.digest, _now(), "directory")
            self._failed_digest = None
            self.status = replace(self.status, reloads=self.status.reloads + 1, failing=False)
            names = ", ".join(policy.name for policy in attempt.policy_set.policies)
            log.info("policies reloaded from %s: %s (%s)", self.directory, names, files.digest)
            self._keep(attempt)
            self._notify("success")
            return "reloaded"

    def start_watching(self, interval_seconds: float) -> DirectoryWatcher:
        """A daemon thread that reloads when the directory changes. Start it in the process
        that serves (a gunicorn worker), never before a fork: threads do not survive one."""
        watcher = DirectoryWatcher(
            self.directory, interval_seconds, lambda: self.reload() != "unsettled"
        )
        watcher.start()
        return watcher

    def _hold_back(self, changing: tuple[str, ...]) -> None:
        """One line naming the files held back. A ConfigMap swapped during a load names none:
        the next poll takes the newer set, nothing was being written."""
        if changing:
            log.info(
                "policies in %s: %s; keeping the last good set (%s)",
                self.directory,
                _still_written(changing),
                self.current.digest,
            )

    def _record_failure(self, attempt: Attempt, *, first: bool) -> None:
        # Content read while it was being written is no verdict on it: load it when it settles.
        self._failed_digest = attempt.files.digest if attempt.settled else None
        self.status = replace(
            self.status,
            failures=self.status.failures + 1,
            failing=True,
            last_failure=ReloadFailure(_now(), tuple(str(p) for p in attempt.problems)),
        )
        serving = "serving the last good snapshot" if first else "the last good set keeps serving"
        log.warning(
            "the policies in %s do not load; %s (%s)", self.directory, serving, self.current.digest
        )
        for problem in attempt.problems:
            log.warning("  %s", problem)

    def _keep(self, attempt: Attempt) -> None:
        if self.last_good is None:
            return
        try:
            self.last_good.save(attempt.files, attempt.observed_at)
        except (OSError, ValueError) as error:
            where = self.last_good.state_dir
            log.warning("could not keep the last good policy set in %s: %s", where, error)

    def _notify(self, result: ReloadResult | None) -> None:
        """Tells each observer in turn; one that fails does not keep the rest from hearing."""
        for observer in self._observers:
            try:
                observer.policies_observed(result, self.current, self.status)
            except Exception:
                log.exception("recording the policy reload failed")
