"""Policy edits while reviews stream in: the real server, with its default workers and reload
interval, serving a plain policy directory that is edited over and over at a steady load.

The edits go round three kinds: a good edit (a new default card, so each good set gives the
example pod a VRAM amount of its own), written in place at once or renamed into place; a
broken edit (a schema error, a YAML syntax error, a file cut mid-line), written in place; and a
half-written edit, a good one written in place in eight pieces with a 0.2 s pause after each.
No review may fail, every answer must be one a good set gives (never one of a broken or an
unfinished file), and every worker must serve each good edit within 2 s of it. `make soak`
runs it with the issue's hundred edits (RELOAD_EDITS=100); here there are fewer.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.support.kept_alive import REVIEW
from tests.support.server import REPO_ROOT, WebhookServer
from tests.support.steady_load import SteadyLoad
from webhook.policy.loader import load_policy_directory
from webhook.policy.snapshot import PolicyFiles

EDITS = int(os.environ.get("RELOAD_EDITS", "9"))
REVIEWS_PER_SECOND = float(os.environ.get("RELOAD_RATE", "500"))
CONVERGE_BOUND_SECONDS = 2.0
# Each pause is shorter than the half second a file must keep still to be read; together they
# span more than the default reload interval (1 s), so every worker's poll meets a file still
# being written at least once per slow edit, however the polls fall.
PARTS = 8
WRITER_PAUSE_SECONDS = 0.2
DEADLINE_SECONDS = 10
RANDOM_SEED = int(os.environ.get("RELOAD_SEED", str(random.randrange(2**32))))

SHIPPED = (REPO_ROOT / "policies" / "default.yaml").read_text()
SHIPPED_MODEL = "Tesla-T4"
# Cards of the shipped catalogue whose memory divides by four, so a quarter is exact.
MODELS = {
    "Tesla-T4": 15360,
    "NVIDIA-A10": 23028,
    "NVIDIA-L40S": 46068,
    "NVIDIA-RTX-A6000": 49140,
    "NVIDIA-A100-SXM4-40GB": 40960,
    "NVIDIA-A100-SXM4-80GB": 81920,
}
# The variables the shipped policy gives a share (those of its frameworks and hard limit).
ENV_NAMES = tuple(
    sorted(
        template.name
        for policy in load_policy_directory(REPO_ROOT / "policies")
        if policy.sharing is not None
        for template in policy.sharing.env
    )
)

# What an answer gave the example pod's container: its VRAM and the names of its env.
Outcome = tuple[int, tuple[str, ...]]
Readiness = dict[str, Any]


def good_version(model: str) -> str:
    assert f"defaultModel: {SHIPPED_MODEL}\n" in SHIPPED
    return SHIPPED.replace(f"defaultModel: {SHIPPED_MODEL}\n", f"defaultModel: {model}\n")


def outcome_of(model: str) -> Outcome:
    return MODELS[model] // 4, ENV_NAMES  # the example asks for 250m of the default card


def broken_versions() -> list[tuple[str, str]]:
    cut = SHIPPED.index("      - NVIDIA-L4\n") + len("      - NVI")
    return [
        ("a schema error", SHIPPED.replace("unit: MiB", "unit: KiB")),
        ("a YAML syntax error", SHIPPED.replace("vramResource: example.com/vram", "vram: [")),
        ("a file cut mid-line", SHIPPED[:cut]),
    ]


class AnswerReader:
    """Reads the outcome out of an answer. Answers to the same pod under the same set carry
    the same patch, so each patch is worked out once."""

    def __init__(self) -> None:
        self._outcomes: dict[str, Outcome] = {}

    def __call__(self, body: bytes, uid: str) -> Outcome:
        answer = json.loads(body)["response"]
        assert answer["uid"] == uid, answer
        assert answer["allowed"] is True, answer
        patch = answer["patch"]
        if patch not in self._outcomes:
            pod = jsonpatch.apply_patch(
                copy.deepcopy(REVIEW["request"]["object"]), json.loads(base64.b64decode(patch))
            )
            (container,) = pod["spec"]["containers"]
            vram = int(container["resources"]["limits"]["example.com/vram"])
            names = tuple(sorted(entry["name"] for entry in container.get("env", [])))
            self._outcomes[patch] = (vram, names)
        return self._outcomes[patch]


@dataclass(frozen=True)
class GoodEdit:
    written_at: float  # time.monotonic() when the last byte was written
    written_at_wall: float  # time.time() then, to compare with the log's times
    digest: str
    outcome: Outcome
    seen_served_after: float  # seconds until /readyz showed every worker serving it


@dataclass
class Editor:
    """Edits default.yaml in a plain policy directory and watches the workers take it."""

    server: WebhookServer
    directory: Path
    scratch: Path
    good: list[GoodEdit] = field(default_factory=list)
    partial: set[str] = field(default_factory=set)  # digests of unfinished files written
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.directory / "default.yaml"

    def write_in_place(self, text: str) -> None:
        with self.path.open("w") as file:
            file.write(text)

    def rename_into_place(self, text: str) -> None:
        staged = self.directory / ".default.yaml.new"
        staged.write_text(text)
        os.replace(staged, self.path)

    def write_with_pauses(self, text: str) -> None:
        """A slow writer: the text in PARTS pieces, a pause after each but the last, so that
        the file spends most of a poll interval unfinished."""
        size = -(-len(text) // PARTS)
        pieces = [text[start : start + size] for start in range(0, len(text), size)]
        for written in range(1, len(pieces)):
            (self.scratch / "default.yaml").write_text("".join(pieces[:written]))
            self.partial.add(PolicyFiles.read(self.scratch).digest)
        with self.path.open("w") as file:
            for piece in pieces[:-1]:
                file.write(piece)
                file.flush()
                time.sleep(WRITER_PAUSE_SECONDS)
            file.write(pieces[-1])

    def readiness(self) -> Readiness:
        client = self.server.client()  # a new connection, so either worker may answer
        try:
            reply = client.request("GET", "/readyz")
        finally:
            client.close()
        assert reply.status == 200, reply.body
        answer: Readiness = reply.json()
        return answer

    def until_every_worker(self, what: str, holds: Callable[[Readiness], bool]) -> float:
        """Poll /readyz until the latest answer of every worker meets `holds`; the seconds."""
        started = time.monotonic()
        latest: dict[int, Readiness] = {}
        while time.monotonic() - started < DEADLINE_SECONDS:
            answer = self.readiness()
            latest[answer["worker"]] = answer
            pids = self.server.worker_pids()
            if len(pids) == 2 and all(p in latest and holds(latest[p]) for p in pids):
                return time.monotonic() - started
            time.sleep(0.01)
        raise AssertionError(f"the workers did not come to {what}: {latest}")

    def good_edit(self, model: str, write: str) -> None:
        text = good_version(model)
        {"at once": self.write_in_place, "renamed into place": self.rename_into_place}.get(
            write, self.write_with_pauses
        )(text)
        written_at, written_at_wall = time.monotonic(), time.time()
        digest = PolicyFiles.read(self.directory).digest
        seconds = self.until_every_worker(
            f"serve {model}",
            lambda a: a["policySet"]["digest"] == digest and not a["reload"]["failing"],
        )
        self.good.append(GoodEdit(written_at, written_at_wall, digest, outcome_of(model), seconds))
        self.kinds[f"good {write}"] = self.kinds.get(f"good {write}", 0) + 1

    def broken_edit(self, kind: str, text: str, last_good: str) -> None:
        self.write_in_place(text)
        self.until_every_worker(
            f"refuse {kind}",
            lambda a: a["reload"]["failing"] and a["policySet"]["digest"] == last_good,
        )
        self.kinds[f"broken by {kind}"] = self.kinds.get(f"broken by {kind}", 0) + 1


@pytest.fixture
def server(tmp_path: Path) -> Iterator[WebhookServer]:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "default.yaml").write_text(SHIPPED)
    # "": the server's own default interval, whatever the environment running the tests says.
    defaults = {"POLICY_RELOAD_SECONDS": "", "WORKERS": "2"}
    webhook = WebhookServer(policies, tmp_path / "certs", tmp_path / "gunicorn.log", defaults)
    webhook.start()
    yield webhook
    webhook.stop()


def reload_delays(edit: GoodEdit, records: list[dict[str, Any]], workers: set[int]) -> float:
    """Seconds from a good edit to the last worker's log line saying it serves the edit."""
    reloaded_at: dict[int, float] = {}
    for record in records:
        if (
            record["message"].startswith("policies reloaded from")
            and edit.digest in (record["message"])
        ):
            at = datetime.strptime(record["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
            seconds = at.replace(tzinfo=UTC).timestamp() - edit.written_at_wall
            if seconds > -0.01:  # the same set may have been served before, in an earlier edit
                reloaded_at.setdefault(record["pid"], seconds)
    assert set(reloaded_at) >= workers, (edit, reloaded_at)
    return max(reloaded_at[pid] for pid in workers)


def test_edits_under_load_fail_no_review_and_reach_every_worker_within_two_seconds(
    server: WebhookServer, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    editor = Editor(server, server.policy_dir, scratch)
    models = [model for model in MODELS if model != SHIPPED_MODEL]
    broken = broken_versions()
    good_writes = ["at once", "renamed into place"]
    # Edits start at random points of the workers' reload intervals (1 s by default), never in
    # step with them.
    phases = random.Random(RANDOM_SEED)
    editor.until_every_worker("serve the shipped set", lambda a: not a["reload"]["failing"])
    workers = server.worker_pids()
    started = time.monotonic()
    with SteadyLoad(server, AnswerReader(), REVIEWS_PER_SECOND) as load:
        time.sleep(0.5)
        for number in range(EDITS):
            time.sleep(phases.uniform(0, 1))
            cycle, kind = divmod(number, 3)
            model = models[number % len(models)]
            if kind == 0:
                editor.good_edit(model, good_writes[cycle % 2])
            elif kind == 1:
                name, text = broken[cycle % len(broken)]
                editor.broken_edit(name, text, PolicyFiles.read(editor.directory).digest)
            else:
                editor.good_edit(model, "in pieces")
        time.sleep(0.5)
    elapsed = time.monotonic() - started

    answers = sorted(load.answers, key=lambda answer: answer.sent_at)
    failures = load.failures()
    good_outcomes = {outcome_of(model) for model in MODELS}
    foreign = {a.outcome for a in answers if not a.failure and a.outcome not in good_outcomes}
    # Answers sent more than 2 s after a good edit (and before the next) are that edit's.
    stale = []
    ends = [edit.written_at for edit in editor.good[1:]] + [float("inf")]
    for edit, end in zip(editor.good, ends, strict=True):
        start = edit.written_at + CONVERGE_BOUND_SECONDS
        stale += [a for a in answers if start <= a.sent_at < end and a.outcome != edit.outcome]
    records = server.log_records()
    assert server.worker_pids() == workers  # no worker was replaced along the way
    held_back = sum(1 for record in records if "is still being written" in record["message"])
    delays = [reload_delays(edit, records, workers) for edit in editor.good]
    seen_after = [edit.seen_served_after for edit in editor.good]
    waits = [answer.seconds for answer in answers if not answer.failure]
    print(
        f"\n{EDITS} edits ({', '.join(f'{n} {k}' for k, n in sorted(editor.kinds.items()))}) in "
        f"{elapsed:.0f} s; {len(answers)} reviews at {load.achieved_rate:.0f}/s "
        f"(asked {REVIEWS_PER_SECOND:.0f}/s), {len(failures)} failed, p99 "
        f"{statistics.quantiles(waits, n=100)[98] * 1000:.1f} ms; every worker serving a good "
        f"edit after median {statistics.median(delays):.2f} s, max {max(delays):.2f} s (by "
        f"their logs; seen in /readyz after max {max(seen_after):.2f} s); an unfinished file "
        f"held back {held_back} times; RELOAD_SEED={RANDOM_SEED}"
    )
    assert failures == [], failures[:5]
    assert foreign == set()
    assert stale == [], stale[:5]
    # No worker loaded an unfinished file: each load names the digest of what it read.
    assert not any(digest in server.log() for digest in editor.partial)
    assert held_back > 0  # the workers did look at unfinished files
    assert max(delays) < CONVERGE_BOUND_SECONDS
    assert load.achieved_rate > 0.9 * REVIEWS_PER_SECOND
