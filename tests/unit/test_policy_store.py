"""Live reload of the policy directory, without a server: the fingerprint that notices a change,
the wait for files written in place to settle, the store that swaps in only a set that loads,
and the last good snapshot on disk."""

from __future__ import annotations

import io
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import REPO_ROOT, MountedConfigMap
from webhook.cli.lint import run_lint
from webhook.policy import directory_watch
from webhook.policy import store as store_module
from webhook.policy.directory_watch import DirectoryWatcher, directory_fingerprint
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError
from webhook.policy.snapshot import SNAPSHOTS, LastGood, PolicyFiles
from webhook.policy.store import (
    PolicyStore,
    ReloadResult,
    ReloadStatus,
    ServedSet,
    load_settled_directory,
)
from webhook.server.settings import Settings, SettingsError

GOOD = (REPO_ROOT / "policies" / "default.yaml").read_text()
OTHER_MODEL = GOOD.replace("defaultModel: Tesla-T4", "defaultModel: NVIDIA-A10G")
BROKEN = GOOD.replace("unit: MiB", "unit: KiB")
BROKEN_LINE = BROKEN.splitlines().index("    unit: KiB") + 1
# A second policy that can be served beside the default one.
PRODUCTION = (REPO_ROOT / "tests/scenarios/teams/policies/production.yaml").read_text()


def first_half(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[: len(lines) // 2])


# Half of the shipped policy, cut at a line, as a writer that paused would leave it: it
# still loads (test_half_of_the_shipped_policy_passes_lint), with half the models.
HALF_OTHER_MODEL = first_half(OTHER_MODEL)


def broken_problem(directory: Path) -> str:
    return (
        f"{directory / 'default.yaml'}:{BROKEN_LINE}: spec.sharing.unit: "
        "'KiB' is not one of 'MiB', 'GiB'"
    )


def default_model(store: PolicyStore) -> str:
    (policy,) = store.current.policy_set.policies
    assert policy.sharing is not None
    return policy.sharing.default_model


@pytest.fixture(autouse=True)
def short_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Most tests write a file and reload at once: a short settle interval keeps them quick
    while still going through the wait."""
    settle_after(monkeypatch, 0.02)


def settle_after(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    monkeypatch.setattr(directory_watch, "SETTLE_SECONDS", seconds)


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "default.yaml").write_text(GOOD)
    return directory


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[ReloadResult | None, str | None, bool]] = []

    def policies_observed(
        self, result: ReloadResult | None, current: ServedSet, status: ReloadStatus
    ) -> None:
        self.seen.append((result, current.digest, status.failing))


class PausingWriter(threading.Thread):
    """Rewrites a file in place as a slow writer does: truncates it, writes `first`, pauses,
    then writes `rest`. `paused` is set once `first` is on disk."""

    def __init__(self, path: Path, first: str, rest: str, pause_seconds: float) -> None:
        super().__init__(daemon=True)
        self.path, self.first, self.rest, self.pause_seconds = path, first, rest, pause_seconds
        self.paused = threading.Event()

    def run(self) -> None:
        with self.path.open("w") as file:
            file.write(self.first)
            file.flush()
            self.paused.set()
            time.sleep(self.pause_seconds)
            file.write(self.rest)


def pausing_writer(path: Path, text: str, pause_seconds: float) -> PausingWriter:
    half = first_half(text)
    return PausingWriter(path, half, text[len(half) :], pause_seconds)


def held_back_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "still being written" in r.getMessage()]


def count_loads(monkeypatch: pytest.MonkeyPatch, before: Callable[[], None] | None = None) -> list:
    calls: list[Path] = []
    load = PolicySet.load

    def counted(cls: type[PolicySet], directory: Path) -> PolicySet:
        calls.append(directory)
        if before is not None:
            before()
        return load(directory)

    monkeypatch.setattr(PolicySet, "load", classmethod(counted))
    return calls


# --- the fingerprint ------------------------------------------------------------------------


def test_the_fingerprint_is_stable_while_nothing_changes(policy_dir: Path) -> None:
    assert directory_fingerprint(policy_dir) == directory_fingerprint(policy_dir)


def test_the_fingerprint_changes_on_an_edit(policy_dir: Path) -> None:
    before = directory_fingerprint(policy_dir)
    (policy_dir / "default.yaml").write_text(OTHER_MODEL)
    assert directory_fingerprint(policy_dir) != before


def test_the_fingerprint_changes_on_an_edit_of_the_same_size(policy_dir: Path) -> None:
    path = policy_dir / "default.yaml"
    before = directory_fingerprint(policy_dir)
    mtime = path.stat().st_mtime_ns
    path.write_text(GOOD.replace("Tesla-T4", "Tesla-T5"))
    os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
    assert directory_fingerprint(policy_dir) != before


def test_the_fingerprint_changes_on_a_new_file(policy_dir: Path) -> None:
    before = directory_fingerprint(policy_dir)
    (policy_dir / "team.yml").write_text("")
    assert directory_fingerprint(policy_dir) != before


def test_the_fingerprint_changes_on_a_removed_file(policy_dir: Path) -> None:
    (policy_dir / "team.json").write_text("{}")
    before = directory_fingerprint(policy_dir)
    (policy_dir / "team.json").unlink()
    assert directory_fingerprint(policy_dir) != before


def test_the_fingerprint_ignores_hidden_and_other_files(policy_dir: Path) -> None:
    before = directory_fingerprint(policy_dir)
    (policy_dir / "README.md").write_text("notes")
    (policy_dir / ".draft.yaml").write_text("")
    assert directory_fingerprint(policy_dir) == before


def test_the_fingerprint_changes_when_a_configmap_swaps_its_data_link(tmp_path: Path) -> None:
    mount = MountedConfigMap(tmp_path / "mounted")
    mount.publish({"default.yaml": GOOD})
    assert (mount.directory / "default.yaml").readlink() == Path("..data/default.yaml")
    before = directory_fingerprint(mount.directory)
    # The same content again: only the `..data` link and the inodes behind it change.
    mount.publish({"default.yaml": GOOD})
    after = directory_fingerprint(mount.directory)
    assert after != before
    assert after.data_link != before.data_link
    assert [file.name for file in after.files] == ["default.yaml"]


def test_only_links_into_a_configmaps_data_count_as_published(
    tmp_path: Path, policy_dir: Path
) -> None:
    mount = MountedConfigMap(tmp_path / "mounted")
    mount.publish({"default.yaml": GOOD})
    (mount.directory / "local.yaml").write_text(PRODUCTION)  # a plain file beside the links
    (policy_dir / "linked.yaml").symlink_to(policy_dir / "default.yaml")
    published = {seen.name: seen.published for seen in directory_fingerprint(mount.directory).files}
    assert published == {"default.yaml": True, "local.yaml": False}
    assert not any(seen.published for seen in directory_fingerprint(policy_dir).files)


def test_a_missing_directory_has_a_fingerprint_too(tmp_path: Path) -> None:
    gone = directory_fingerprint(tmp_path / "absent")
    assert gone.error and gone.files == ()


# --- the watcher ----------------------------------------------------------------------------


def test_no_change_means_no_reload(policy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = PolicyStore.open(policy_dir)
    loads = count_loads(monkeypatch)
    watcher = DirectoryWatcher(policy_dir, 60, lambda: store.reload() != "unsettled")
    assert watcher.poll()  # the first poll always looks, and finds the set already serving
    assert not watcher.poll()
    assert not watcher.poll()
    assert loads == []
    assert store.status == ReloadStatus()


def test_a_change_is_loaded_once(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = PolicyStore.open(policy_dir)
    watcher = DirectoryWatcher(policy_dir, 60, lambda: store.reload() != "unsettled")
    watcher.poll()
    loads = count_loads(monkeypatch)
    (policy_dir / "default.yaml").write_text(OTHER_MODEL)
    assert watcher.poll()
    assert not watcher.poll()
    assert len(loads) == 1
    assert default_model(store) == "NVIDIA-A10G"
    assert held_back_lines(caplog) == []  # written at once, so settled at the first look


def test_a_directory_that_changes_during_a_load_is_loaded_again(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PolicyStore.open(policy_dir)
    watcher = DirectoryWatcher(policy_dir, 60, lambda: store.reload() != "unsettled")
    watcher.poll()
    (policy_dir / "default.yaml").write_text(BROKEN)
    edits = iter([OTHER_MODEL])

    def edit_during_load() -> None:
        text = next(edits, None)
        if text is not None:
            (policy_dir / "default.yaml").write_text(text)

    count_loads(monkeypatch, before=edit_during_load)
    assert store.reload() == "unsettled"
    assert store.status == ReloadStatus()  # what was read was a mix: nothing recorded
    assert watcher.poll()
    assert default_model(store) == "NVIDIA-A10G"
    assert store.status.reloads == 1 and store.status.failures == 0


def test_a_watcher_that_hits_an_unexpected_exception_logs_it_and_keeps_watching(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []
    done = threading.Event()

    def on_change() -> bool:
        calls.append(1)
        if len(calls) < 4:
            raise RuntimeError("a bug")
        done.set()
        return True

    watcher = DirectoryWatcher(tmp_path, 0.01, on_change)
    watcher.start()
    try:
        assert done.wait(10)
    finally:
        watcher.stop(10)
    logged = [record for record in caplog.records if record.exc_info]
    assert len(logged) == 1  # the same fault, repeated, is logged once
    assert "RuntimeError: a bug" in caplog.text


# --- files written in place: the settle interval -------------------------------------------


def test_half_of_the_shipped_policy_passes_lint(tmp_path: Path) -> None:
    """What makes a half-written file dangerous: cut at a line, it is still a good policy."""
    (tmp_path / "default.yaml").write_text(HALF_OTHER_MODEL)
    assert run_lint(tmp_path, stdout=io.StringIO()) == 0
    (half,) = PolicySet.load(tmp_path).policies
    assert half.sharing is not None and half.sharing.default_model == "NVIDIA-A10G"
    (whole,) = PolicySet.load(REPO_ROOT / "policies").policies
    assert whole.sharing is not None
    assert len(half.sharing.models) < len(whole.sharing.models)


def test_a_writer_that_pauses_mid_file_is_never_read_half_way(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = PolicyStore.open(policy_dir)
    serving = store.current
    settle_after(monkeypatch, 0.5)
    caplog.set_level(logging.INFO, logger="webhook")
    writer = pausing_writer(policy_dir / "default.yaml", OTHER_MODEL, pause_seconds=0.1)
    writer.start()
    assert writer.paused.wait(5)

    assert store.reload() == "unsettled"  # the half changed while it was settling
    assert store.current is serving
    assert held_back_lines(caplog) == [
        f"policies in {policy_dir}: default.yaml is still being written; "
        f"keeping the last good set ({serving.digest})"
    ]
    assert store.status == ReloadStatus()  # held back is not a failure

    writer.join(5)
    assert store.reload() == "reloaded"
    assert store.current.digest == PolicyFiles.read(policy_dir).digest
    assert (policy_dir / "default.yaml").read_text() == OTHER_MODEL


def test_a_watched_directory_never_serves_a_half_written_file(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reported race: a writer pauses mid-file while the watcher polls, here every 10 ms."""
    recorder = Recorder()
    store = PolicyStore.open(policy_dir, observers=[recorder])
    settle_after(monkeypatch, 0.3)
    watcher = store.start_watching(0.01)
    texts = [OTHER_MODEL, GOOD, OTHER_MODEL]
    try:
        for text in texts:
            writer = pausing_writer(policy_dir / "default.yaml", text, pause_seconds=0.1)
            writer.start()
            writer.join(5)
            served = PolicyFiles.read(policy_dir).digest
            deadline = time.monotonic() + 5
            while store.current.digest != served and time.monotonic() < deadline:
                time.sleep(0.01)
            assert store.current.digest == served
    finally:
        watcher.stop(5)
    halves = set()
    for text in texts:
        (policy_dir / "default.yaml").write_text(first_half(text))
        halves.add(PolicyFiles.read(policy_dir).digest)
    served_digests = [digest for result, digest, _ in recorder.seen if result == "success"]
    assert halves.isdisjoint(served_digests)
    assert len(served_digests) == len(texts)


def test_held_back_files_are_named_and_settled_ones_are_not(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (policy_dir / "production.yaml").write_text(PRODUCTION)
    store = PolicyStore.open(policy_dir)
    settle_after(monkeypatch, 0.5)
    caplog.set_level(logging.INFO, logger="webhook")
    (policy_dir / "production.yaml").write_text(PRODUCTION + "# reviewed\n")  # at once
    writer = pausing_writer(policy_dir / "default.yaml", OTHER_MODEL, pause_seconds=0.1)
    writer.start()
    assert writer.paused.wait(5)
    assert store.reload() == "unsettled"
    writer.join(5)
    (line,) = held_back_lines(caplog)
    assert f"policies in {policy_dir}: default.yaml is still being written;" in line
    assert "production.yaml" not in line
    assert store.reload() == "reloaded"
    assert held_back_lines(caplog) == [line]


def test_a_writer_that_starts_after_the_files_settled_is_caught_after_the_load(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the last look and the read, a writer starts and pauses: the content is the same
    half before and after the load, but the file is no longer the one found settled."""
    store = PolicyStore.open(policy_dir)
    serving = store.current
    settle = store_module.settle

    def writer_starts_after(*args: Any) -> Any:
        found = settle(*args)
        (policy_dir / "default.yaml").write_text(HALF_OTHER_MODEL)
        return found

    monkeypatch.setattr(store_module, "settle", writer_starts_after)
    assert store.reload() == "unsettled"
    assert store.current is serving


def test_a_file_as_it_was_at_an_earlier_look_is_not_waited_for_again(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look that held a file back saw it whole at its end; a poll at least a settle
    interval later takes it without a second wait."""
    store = PolicyStore.open(policy_dir)
    settle_after(monkeypatch, 0.5)
    writer = pausing_writer(policy_dir / "default.yaml", OTHER_MODEL, pause_seconds=0.1)
    writer.start()
    assert writer.paused.wait(5)
    assert store.reload() == "unsettled"
    writer.join(5)
    time.sleep(0.5)
    # What the reload asks to wait, rather than the wall time it takes: on a loaded machine
    # the reload alone can take longer than the settle interval.
    waits: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(store_module.time, "sleep", lambda s: (waits.append(s), real_sleep(s)))
    assert store.reload() == "reloaded"
    monkeypatch.setattr(store_module.time, "sleep", real_sleep)
    assert not [wait for wait in waits if wait >= 0.25]  # a second wait would be 0.5 s


def test_a_file_left_truncated_is_loaded_when_it_settles_and_reported(policy_dir: Path) -> None:
    """A writer that died mid-file: the truncated file settles like any edit, so it is loaded,
    and one that does not load is reported as any bad edit is."""
    store = PolicyStore.open(policy_dir)
    truncated = GOOD[: GOOD.index("unit: MiB") + len("unit: Mi")]
    (policy_dir / "default.yaml").write_text(truncated)
    assert store.reload() == "failed"
    assert store.status.failing
    assert store.status.last_failure is not None
    problems = store.status.last_failure.problems
    assert any("spec.sharing.unit: 'Mi' is not one of 'MiB', 'GiB'" in p for p in problems)


def test_a_configmap_swap_is_taken_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle_after(monkeypatch, 5)  # any wait would show
    mount = MountedConfigMap(tmp_path / "mounted")
    mount.publish({"default.yaml": GOOD})
    started = time.monotonic()
    store = PolicyStore.open(mount.directory)
    mount.publish({"default.yaml": OTHER_MODEL})
    assert store.reload() == "reloaded"
    assert default_model(store) == "NVIDIA-A10G"
    assert time.monotonic() - started < 1


def test_a_plain_file_beside_a_configmap_still_settles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mount = MountedConfigMap(tmp_path / "mounted")
    mount.publish({"default.yaml": GOOD})
    (mount.directory / "production.yaml").write_text(PRODUCTION)
    store = PolicyStore.open(mount.directory)
    settle_after(monkeypatch, 0.5)
    writer = pausing_writer(mount.directory / "production.yaml", PRODUCTION, pause_seconds=0.1)
    writer.start()
    assert writer.paused.wait(5)
    assert store.reload() == "unsettled"
    writer.join(5)


# --- startup -------------------------------------------------------------------------------


def test_startup_waits_for_a_writer_that_paused(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle_after(monkeypatch, 0.5)
    writer = pausing_writer(policy_dir / "default.yaml", OTHER_MODEL, pause_seconds=0.1)
    writer.start()
    assert writer.paused.wait(5)
    attempt = load_settled_directory(policy_dir)
    assert attempt.policy_set is not None
    assert attempt.files.contents == (("default.yaml", OTHER_MODEL.encode()),)


def test_startup_of_a_settled_directory_waits_one_interval_and_no_more(
    policy_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle_after(monkeypatch, 0.3)
    started = time.monotonic()
    assert load_settled_directory(policy_dir).policy_set is not None
    assert 0.3 <= time.monotonic() - started < 0.6


def test_startup_gives_up_on_a_file_that_keeps_changing_and_loads_it_once_it_settles(
    policy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only its identity keeps changing here (a writer that rewrites the same text), so what
    startup read is what settles: that is no reason to skip it later."""
    last_good = LastGood(tmp_path / "state")
    PolicyStore.open(policy_dir, last_good=last_good)
    settle_after(monkeypatch, 0.1)
    monkeypatch.setattr(store_module, "STARTUP_PATIENCE_SECONDS", 0.3)
    path = policy_dir / "default.yaml"
    stop = threading.Event()

    def touch() -> None:
        while not stop.wait(0.02):
            mtime = time.time_ns()
            os.utime(path, ns=(mtime, mtime))

    toucher = threading.Thread(target=touch, daemon=True)
    toucher.start()
    try:
        store = PolicyStore.open(policy_dir, last_good=last_good)
    finally:
        stop.set()
        toucher.join(5)
    assert store.current.source == "last-good snapshot"
    assert store.status.last_failure is not None
    (problem,) = store.status.last_failure.problems
    assert problem == (
        f"{policy_dir}: (directory): default.yaml is still being written after 0.3 s "
        "(a file is read once it has stayed unchanged for 0.1 s)"
    )
    assert store.reload() == "reloaded"
    assert store.current.source == "directory" and not store.status.failing


# --- the store ------------------------------------------------------------------------------


def test_a_bad_edit_keeps_the_old_set_and_records_file_line_and_field(
    policy_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    store = PolicyStore.open(policy_dir, observers=[recorder])
    serving = store.current
    caplog.set_level(logging.INFO, logger="webhook")
    (policy_dir / "default.yaml").write_text(BROKEN)

    assert store.reload() == "failed"
    assert store.current is serving
    assert store.status.failing and store.status.failures == 1 and store.status.reloads == 0
    assert store.status.last_failure is not None
    assert store.status.last_failure.problems == (broken_problem(policy_dir),)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[-1] == f"  {broken_problem(policy_dir)}"
    assert all(r.name == "webhook" for r in caplog.records)

    caplog.clear()
    (policy_dir / "default.yaml").write_text(BROKEN)  # the same failing content, written again
    assert store.reload() == "unchanged"
    assert store.status.failures == 1
    assert caplog.records == []

    (policy_dir / "default.yaml").write_text(OTHER_MODEL)
    assert store.reload() == "reloaded"
    assert default_model(store) == "NVIDIA-A10G"
    assert store.current.source == "directory"
    assert store.current.digest == PolicyFiles.read(policy_dir).digest
    assert store.status.reloads == 1 and store.status.failures == 1
    assert not store.status.failing
    assert store.status.last_failure.problems == (broken_problem(policy_dir),)
    assert [result for result, _, _ in recorder.seen] == [None, "failure", "success"]
    assert [failing for _, _, failing in recorder.seen] == [False, True, False]


def test_going_back_to_the_serving_content_clears_the_failure(policy_dir: Path) -> None:
    recorder = Recorder()
    store = PolicyStore.open(policy_dir, observers=[recorder])
    serving = store.current
    (policy_dir / "default.yaml").write_text(BROKEN)
    store.reload()
    (policy_dir / "default.yaml").write_text(GOOD)
    assert store.reload() == "unchanged"
    assert store.current is serving
    assert store.status.reloads == 0 and store.status.failures == 1
    assert not store.status.failing
    assert recorder.seen[-1] == (None, serving.digest, False)


def test_the_digest_covers_names_and_contents(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for directory in (first, second):
        directory.mkdir()
        (directory / "default.yaml").write_text(GOOD)
    assert PolicyFiles.read(first).digest == PolicyFiles.read(second).digest
    (second / "default.yaml").rename(second / "renamed.yaml")
    assert PolicyFiles.read(first).digest != PolicyFiles.read(second).digest
    (second / "renamed.yaml").write_text(OTHER_MODEL)
    assert PolicyFiles.read(second).digest.startswith("sha256:")


def test_a_store_counts_every_outcome(policy_dir: Path) -> None:
    store = PolicyStore.open(policy_dir)
    texts = [OTHER_MODEL, BROKEN, GOOD, BROKEN + "# another try\n", OTHER_MODEL]
    outcomes = []
    for text in texts:
        (policy_dir / "default.yaml").write_text(text)
        outcomes.append(store.reload())
    assert outcomes == ["reloaded", "failed", "reloaded", "failed", "reloaded"]
    assert (store.status.reloads, store.status.failures, store.status.failing) == (3, 2, False)


# --- the last good snapshot -----------------------------------------------------------------


def test_every_successful_load_is_kept_as_the_last_good_snapshot(
    policy_dir: Path, tmp_path: Path
) -> None:
    last_good = LastGood(tmp_path / "state")
    store = PolicyStore.open(policy_dir, last_good=last_good)
    kept = last_good.load()
    assert kept is not None and kept.files.digest == store.current.digest

    (policy_dir / "default.yaml").write_text(OTHER_MODEL)
    store.reload()
    kept = last_good.load()
    assert kept is not None and kept.files.digest == store.current.digest
    assert len(list((tmp_path / "state" / SNAPSHOTS).iterdir())) == 1

    (policy_dir / "default.yaml").write_text(BROKEN)
    store.reload()
    kept = last_good.load()
    assert kept is not None and kept.files.digest == store.current.digest


def test_a_first_load_that_fails_serves_the_last_good_snapshot(
    policy_dir: Path, tmp_path: Path
) -> None:
    last_good = LastGood(tmp_path / "state")
    good_digest = PolicyStore.open(policy_dir, last_good=last_good).current.digest
    (policy_dir / "default.yaml").write_text(BROKEN)

    recorder = Recorder()
    store = PolicyStore.open(policy_dir, last_good=last_good, observers=[recorder])
    assert store.current.source == "last-good snapshot"
    assert store.current.digest == good_digest
    assert store.status.failing and store.status.failures == 1
    assert store.status.last_failure is not None
    assert store.status.last_failure.problems == (broken_problem(policy_dir),)
    assert recorder.seen == [(None, good_digest, True)]

    assert store.reload() == "unchanged"  # the same bad content is not tried again
    (policy_dir / "default.yaml").write_text(GOOD)
    assert store.reload() == "reloaded"  # the same set, now read from the directory
    assert store.current.source == "directory" and store.current.digest == good_digest


def test_a_first_load_that_fails_without_a_snapshot_raises(policy_dir: Path) -> None:
    (policy_dir / "default.yaml").write_text(BROKEN)
    with pytest.raises(PolicyLoadError) as caught:
        PolicyStore.open(policy_dir, last_good=LastGood(policy_dir.parent / "empty-state"))
    assert [str(problem) for problem in caught.value.problems] == [broken_problem(policy_dir)]


def test_an_older_set_never_replaces_a_newer_snapshot(tmp_path: Path) -> None:
    older, newer = tmp_path / "older", tmp_path / "newer"
    for directory, text in ((older, GOOD), (newer, OTHER_MODEL)):
        directory.mkdir()
        (directory / "default.yaml").write_text(text)
    last_good = LastGood(tmp_path / "state")
    now = time.time()
    assert last_good.save(PolicyFiles.read(newer), now)
    assert not last_good.save(PolicyFiles.read(older), now - 5)
    kept = last_good.load()
    assert kept is not None and kept.files.digest == PolicyFiles.read(newer).digest
    # Seen again later, the same set counts as the newer one.
    assert last_good.save(PolicyFiles.read(older), now + 5)
    assert last_good.save(PolicyFiles.read(newer), now + 10)
    assert not last_good.save(PolicyFiles.read(older), now + 7)


# --- settings -------------------------------------------------------------------------------


def test_reload_settings_are_read_from_the_environment() -> None:
    settings = Settings.from_environ({"POLICY_RELOAD_SECONDS": "0.5", "STATE_DIR": "/var/state"})
    assert settings.policy_reload_seconds == 0.5
    assert settings.state_dir == Path("/var/state")
    defaults = Settings.from_environ({})
    assert defaults.policy_reload_seconds == 1 and defaults.state_dir is None
    assert Settings.from_environ({"POLICY_RELOAD_SECONDS": "0"}).policy_reload_seconds == 0


@pytest.mark.parametrize("name", ["POLICY_RELOAD_SECONDS"])
@pytest.mark.parametrize("text", ["-1", "soon", "nan", "inf", "1e-9"])
def test_a_bad_interval_is_refused(name: str, text: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_environ({name: text})
