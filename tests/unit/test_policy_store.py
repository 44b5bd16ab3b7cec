"""Live reload of the policy directory, without a server: the fingerprint that notices a change,
the store that swaps in only a set that loads, and the last good snapshot on disk."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.server import REPO_ROOT, MountedConfigMap
from webhook.policy.directory_watch import DirectoryWatcher, directory_fingerprint
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError
from webhook.policy.snapshot import SNAPSHOTS, LastGood, PolicyFiles
from webhook.policy.store import PolicyStore, ReloadResult, ReloadStatus, ServedSet
from webhook.server.settings import Settings, SettingsError

GOOD = (REPO_ROOT / "policies" / "default.yaml").read_text()
OTHER_MODEL = GOOD.replace("defaultModel: Tesla-T4", "defaultModel: NVIDIA-L4")
BROKEN = GOOD.replace("unit: MiB", "unit: KiB")
BROKEN_LINE = BROKEN.splitlines().index("    unit: KiB") + 1


def broken_problem(directory: Path) -> str:
    return (
        f"{directory / 'default.yaml'}:{BROKEN_LINE}: spec.sharing.unit: "
        "'KiB' is not one of 'MiB', 'GiB'"
    )


def default_model(store: PolicyStore) -> str:
    (policy,) = store.current.policy_set.policies
    assert policy.sharing is not None
    return policy.sharing.default_model


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


def test_a_change_is_loaded_once(policy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = PolicyStore.open(policy_dir)
    watcher = DirectoryWatcher(policy_dir, 60, lambda: store.reload() != "unsettled")
    watcher.poll()
    loads = count_loads(monkeypatch)
    (policy_dir / "default.yaml").write_text(OTHER_MODEL)
    assert watcher.poll()
    assert not watcher.poll()
    assert len(loads) == 1
    assert default_model(store) == "NVIDIA-L4"


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
    assert default_model(store) == "NVIDIA-L4"
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
    assert default_model(store) == "NVIDIA-L4"
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
    assert defaults.policy_reload_seconds == 2 and defaults.state_dir is None
    assert Settings.from_environ({"POLICY_RELOAD_SECONDS": "0"}).policy_reload_seconds == 0


@pytest.mark.parametrize("name", ["POLICY_RELOAD_SECONDS", "LOG_FLUSH_SECONDS"])
@pytest.mark.parametrize("text", ["-1", "soon", "nan", "inf", "1e-9"])
def test_a_bad_interval_is_refused(name: str, text: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_environ({name: text})
