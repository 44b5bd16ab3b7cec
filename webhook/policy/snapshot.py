"""Policy files as read at one moment, and the last good set of them kept on disk.

Every worker (and the gunicorn master, after its check) keeps the set it loaded as the last
good snapshot in the state directory, so that a worker that boots while the policy directory
does not load serves what its siblings serve instead of failing to boot.

Layout of the state directory:

    last-good.lock          flock: writers exclusive, readers shared
    last-good -> snapshots/set-XXXX      swapped with a rename, so readers never see half a set
    snapshots/set-XXXX/     the files, and `.snapshot.json` (digest, when it was observed)

Only the folder the link points to is kept. Several workers save concurrently, possibly sets
of different ages; a save never replaces a set that was observed in the directory later.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from webhook.policy.loader import policy_files
from webhook.policy.policy_set import PolicySet

LINK_NAME = "last-good"
SNAPSHOTS = "snapshots"
LOCK_NAME = "last-good.lock"
METADATA_NAME = ".snapshot.json"  # hidden, so the loader skips it


@dataclass(frozen=True)
class PolicyFiles:
    """The policy files of a directory: names and contents, and the ones that could not be
    read. `digest` is a sha256 over the sorted names and contents, equal for equal sets
    wherever they lie."""

    contents: tuple[tuple[str, bytes], ...]
    unreadable: tuple[tuple[str, str], ...]
    digest: str

    @classmethod
    def read(cls, directory: Path) -> PolicyFiles:
        contents: list[tuple[str, bytes]] = []
        unreadable: list[tuple[str, str]] = []
        try:
            paths = policy_files(directory)
        except OSError as error:
            paths = []
            unreadable.append(("", f"{type(error).__name__}: {error.strerror}"))
        for path in paths:
            try:
                contents.append((path.name, path.read_bytes()))
            except OSError as error:
                unreadable.append((path.name, f"{type(error).__name__}: {error.strerror}"))
        return cls(tuple(contents), tuple(unreadable), _digest(contents, unreadable))


def _digest(contents: list[tuple[str, bytes]], unreadable: list[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    entries = [(name, b"F", data) for name, data in contents]
    entries += [(name, b"E", reason.encode()) for name, reason in unreadable]
    for name, kind, data in sorted(entries):
        encoded = name.encode()
        for part in (encoded, kind, data):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return f"sha256:{digest.hexdigest()}"


@dataclass(frozen=True)
class Snapshot:
    files: PolicyFiles
    policy_set: PolicySet
    observed_at: float


@dataclass(frozen=True)
class _Kept:
    digest: str
    observed_at: float


def _write_metadata(folder: Path, digest: str, observed_at: float) -> None:
    staged = folder / f"{METADATA_NAME}.{os.getpid()}"
    staged.write_text(json.dumps({"digest": digest, "observedAt": observed_at}))
    os.replace(staged, folder / METADATA_NAME)


class LastGood:
    """The last good policy set kept under `state_dir`."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.link = state_dir / LINK_NAME
        self.folders = state_dir / SNAPSHOTS

    def save(self, files: PolicyFiles, observed_at: float) -> bool:
        """Keep `files` (which loaded, as read at `observed_at`, seconds since the epoch), unless
        the kept set was observed later. True when `files` is the kept set."""
        if files.unreadable:
            raise ValueError("only a set whose files were all read can be kept")
        with self._locked(fcntl.LOCK_EX):
            kept = self._kept()
            if kept is not None and kept.observed_at > observed_at:
                return kept.digest == files.digest
            if kept is not None and kept.digest == files.digest:
                # The same set seen again later: a save of an older set must still lose to it.
                _write_metadata(self.link, files.digest, observed_at)
                return True
            self.folders.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="set-", dir=self.folders))
            for name, data in files.contents:
                (folder / name).write_bytes(data)
            _write_metadata(folder, files.digest, observed_at)
            new_link = self.state_dir / f".{LINK_NAME}.{os.getpid()}"
            new_link.unlink(missing_ok=True)
            new_link.symlink_to(Path(SNAPSHOTS) / folder.name)
            os.replace(new_link, self.link)
            self._remove_all_but(folder.name)
        return True

    def load(self) -> Snapshot | None:
        """The kept set, or None when there is none. Raises PolicyLoadError if it does not load
        (it did when it was saved, so only a damaged state directory does that)."""
        with self._locked(fcntl.LOCK_SH):
            kept = self._kept()
            if kept is None:
                return None
            return Snapshot(
                PolicyFiles.read(self.link), PolicySet.load(self.link), kept.observed_at
            )

    def _kept(self) -> _Kept | None:
        try:
            metadata = json.loads((self.link / METADATA_NAME).read_text())
            return _Kept(str(metadata["digest"]), float(metadata["observedAt"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _remove_all_but(self, keep: str) -> None:
        for folder in self.folders.iterdir():
            if folder.name != keep:
                shutil.rmtree(folder, ignore_errors=True)

    @contextmanager
    def _locked(self, operation: int) -> Iterator[None]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, operation)
            yield
        finally:
            os.close(descriptor)
