"""Patches of nodes/status: a 429 waited out as its Retry-After says and sent again up to
TOO_MANY_RETRIES times, every other error in the answer at once, and a batch that keeps at most
`concurrency` patches in flight and answers each once."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3 import HTTPHeaderDict

from webhook.kube import rate_limit
from webhook.nodes import status_patches
from webhook.nodes.node_plan import Advertise, NodeView
from webhook.nodes.patch_limits import PatchLimits
from webhook.nodes.status_patches import (
    JSON_PATCH,
    PATCH_TIMEOUT,
    RETRY_AFTER_DEFAULT,
    RETRY_AFTER_MAX,
    TOO_MANY_RETRIES,
    PatchDone,
    PatchRequest,
    StatusPatcher,
    Stopped,
    retry_after,
)

UNLIMITED = PatchLimits(qps=0, burst=1, concurrency=4)
VRAM = "example.com/vram"


class Answer:
    """The HTTP response a method called with `_preload_content=False` returns."""

    def __init__(self, data: bytes) -> None:
        self.data = data


def too_many(seconds: str | None = "0") -> ApiException:
    error = ApiException(status=429, reason="Too Many Requests")
    error.headers = {} if seconds is None else {"Retry-After": seconds}
    return error


def patched_node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"capacity": {VRAM: "15360"}}}


class FakeCore:
    """`CoreV1Api.patch_node_status` answering each call with the next of `errors` to raise,
    and once they are spent the patched node."""

    def __init__(self, errors: list[BaseException] | None = None, delay: float = 0.0) -> None:
        self._errors = list(errors or [])
        self._delay = delay
        self._lock = threading.Lock()
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    def patch_node_status(self, name: str, body: Any, **kwargs: Any) -> Answer:
        with self._lock:
            self.calls.append((name, body, kwargs))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            error = self._errors.pop(0) if self._errors else None
        try:
            if self._delay:
                time.sleep(self._delay)
            if error is not None:
                raise error
            if name.startswith("failing-"):
                raise ApiException(status=422, reason="Unprocessable Entity")
            return Answer(json.dumps(patched_node(name)).encode())
        finally:
            with self._lock:
                self.in_flight -= 1


def patcher(core: FakeCore, limits: PatchLimits = UNLIMITED, **options: Any) -> StatusPatcher:
    return StatusPatcher(core, limits, **options)  # type: ignore[arg-type]


def request(name: str = "gpu-1") -> PatchRequest:
    operations = [
        {"op": "add", "path": f"/status/capacity/{VRAM.replace('/', '~1')}", "value": "1"}
    ]
    return PatchRequest(NodeView(name, {}, {}, {}, "7"), operations, {VRAM: Advertise(1, "a test")})


def test_a_patch_is_sent_as_a_json_patch_and_answers_the_patched_node() -> None:
    core = FakeCore()
    sent = request()
    done = patcher(core).send(sent)
    assert done == PatchDone(sent, patched=patched_node("gpu-1"))
    assert core.calls == [
        (
            "gpu-1",
            sent.operations,
            {
                "_preload_content": False,
                "_content_type": JSON_PATCH,
                "_request_timeout": PATCH_TIMEOUT,
            },
        )
    ]


@pytest.mark.parametrize(
    "throttled",
    [pytest.param(count, id=f"{count} x 429") for count in (1, 2, TOO_MANY_RETRIES)],
)
def test_a_429_is_retried_and_the_patched_node_returned(throttled: int) -> None:
    core = FakeCore([too_many() for _ in range(throttled)])
    sent = request()
    done = patcher(core).send(sent)
    assert done.error is None
    assert done.patched == patched_node("gpu-1")
    assert len(core.calls) == throttled + 1
    assert all(call == core.calls[0] for call in core.calls)


class FakeClock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def never_stopping(_: float) -> bool:
    return False


class RecordingBucket(rate_limit.TokenBucket):
    """The patcher's bucket on a fake clock, its waits passed at once and recorded."""

    made: list[RecordingBucket] = []  # noqa: RUF012 (the buckets the patchers made)

    def __init__(self, qps: float, burst: int) -> None:
        self.clock = FakeClock()
        super().__init__(qps, burst, clock=self.clock)
        self.pauses: list[float] = []
        self.waits: list[float] = []
        RecordingBucket.made.append(self)

    def take(self, wait: rate_limit.Wait = never_stopping) -> bool:
        def passing(seconds: float) -> bool:
            self.waits.append(seconds)
            self.clock.now += seconds
            return wait(0)  # asks the real wait only whether the patcher is stopping

        return super().take(passing)

    def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        super().pause(seconds)


@pytest.fixture
def recording_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[RecordingBucket]]:
    RecordingBucket.made = []
    monkeypatch.setattr(status_patches, "TokenBucket", RecordingBucket)
    yield RecordingBucket


def test_retry_after_is_honoured_through_the_buckets_pause(
    recording_bucket: type[RecordingBucket],
) -> None:
    core = FakeCore([too_many("2"), too_many("5")])
    done = patcher(core).send(request())
    assert done.patched == patched_node("gpu-1")
    (bucket,) = recording_bucket.made
    assert bucket.pauses == [2.0, 5.0]
    # Each retry waited out its Retry-After before it was sent.
    assert bucket.waits == pytest.approx([2.0, 5.0])


def test_a_stopping_patcher_ends_a_patch_waiting_out_a_429_with_stopped() -> None:
    stopping = threading.Event()
    stopping.set()
    core = FakeCore([too_many("30")])
    started = time.monotonic()
    done = patcher(core, stopping=stopping).send(request())
    assert time.monotonic() - started < 5
    assert isinstance(done.error, Stopped)
    assert done.patched is None
    assert len(core.calls) == 1


def test_after_too_many_retries_the_429_is_the_answers_error() -> None:
    core = FakeCore([too_many() for _ in range(TOO_MANY_RETRIES + 1)])
    done = patcher(core).send(request())
    assert isinstance(done.error, ApiException)
    assert done.error.status == 429
    assert done.patched is None
    assert len(core.calls) == TOO_MANY_RETRIES + 1


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ApiException(status=422, reason="test failed"), id="422 from a failed test"),
        pytest.param(ApiException(status=404, reason="Not Found"), id="404 for a deleted node"),
        pytest.param(ApiException(status=500, reason="Internal"), id="500"),
        pytest.param(ApiException(status=0, reason="no answer"), id="no HTTP status"),
        pytest.param(OSError("connection reset"), id="a connection reset"),
        pytest.param(TimeoutError("read timed out"), id="a timeout"),
    ],
)
def test_errors_other_than_429_end_in_the_answers_error_at_once(error: BaseException) -> None:
    core = FakeCore([error])
    sent = request()
    done = patcher(core).send(sent)
    assert done == PatchDone(sent, error=error)
    assert len(core.calls) == 1


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        pytest.param({"Retry-After": "2"}, 2.0, id="a whole number"),
        pytest.param({"Retry-After": "1.5"}, 1.5, id="a fraction"),
        pytest.param({"Retry-After": "0"}, 0.0, id="zero"),
        pytest.param(HTTPHeaderDict({"retry-after": "7"}), 7.0, id="urllib3's headers, any case"),
        pytest.param({}, RETRY_AFTER_DEFAULT, id="no Retry-After"),
        pytest.param(None, RETRY_AFTER_DEFAULT, id="no headers"),
        pytest.param({"Retry-After": "soon"}, RETRY_AFTER_DEFAULT, id="not a number"),
        pytest.param(
            {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"},
            RETRY_AFTER_DEFAULT,
            id="an HTTP date",
        ),
        pytest.param({"Retry-After": "3600"}, RETRY_AFTER_MAX, id="an hour, capped"),
        pytest.param({"Retry-After": "inf"}, RETRY_AFTER_MAX, id="infinity, capped"),
        pytest.param({"Retry-After": "-5"}, 0.0, id="negative, as zero"),
        pytest.param(["Retry-After", "2"], RETRY_AFTER_DEFAULT, id="headers not a mapping"),
    ],
)
def test_retry_after_parses_defaults_and_caps(headers: Any, seconds: float) -> None:
    error = ApiException(status=429, reason="Too Many Requests")
    error.headers = headers
    assert retry_after(error) == seconds


def names_of(answers: list[PatchDone]) -> list[str]:
    return sorted(done.request.node.name for done in answers)


@pytest.mark.parametrize("concurrency", [1, 3], ids=["one at a time", "three at a time"])
def test_a_batch_never_has_more_than_concurrency_in_flight_and_answers_each_once(
    concurrency: int,
) -> None:
    core = FakeCore(delay=0.02)
    sending = patcher(core, PatchLimits(qps=0, burst=1, concurrency=concurrency))
    names = [f"gpu-{index:02}" for index in range(12)]
    answers: list[PatchDone] = []
    with sending.batch() as batch:
        for submitted, name in enumerate(names, start=1):
            answers += batch.submit(request(name))
            # Patches not yet answered are in flight: never more than `concurrency`.
            assert submitted - len(answers) <= concurrency
        answers += batch.finish()
        assert batch.finish() == []
    assert core.most_in_flight == concurrency
    assert names_of(answers) == names
    assert all(done.patched == patched_node(done.request.node.name) for done in answers)


def test_a_batch_answers_failed_patches_with_their_errors() -> None:
    core = FakeCore()
    answers: list[PatchDone] = []
    with patcher(core, PatchLimits(qps=0, burst=1, concurrency=2)).batch() as batch:
        for name in ("gpu-1", "failing-2", "gpu-3", "failing-4"):
            answers += batch.submit(request(name))
        answers += batch.finish()
    by_name: dict[str, PatchDone] = {done.request.node.name: done for done in answers}
    assert sorted(by_name) == ["failing-2", "failing-4", "gpu-1", "gpu-3"]
    assert len(answers) == 4
    failed = {name for name, done in by_name.items() if done.error is not None}
    assert failed == {"failing-2", "failing-4"}
    error = by_name["failing-2"].error
    assert isinstance(error, ApiException) and error.status == 422


def test_a_429_to_one_patch_of_a_batch_is_retried_and_answered_once() -> None:
    core = FakeCore([too_many(), too_many()], delay=0.005)
    answers: list[PatchDone] = []
    with patcher(core, PatchLimits(qps=0, burst=1, concurrency=3)).batch() as batch:
        for index in range(6):
            answers += batch.submit(request(f"gpu-{index}"))
        answers += batch.finish()
    assert names_of(answers) == [f"gpu-{index}" for index in range(6)]
    assert all(done.error is None for done in answers)
    assert len(core.calls) == 8


def test_a_batch_left_by_an_exception_does_not_wait_out_a_429() -> None:
    core = FakeCore([too_many("30")])
    patcher = StatusPatcher(core, UNLIMITED)  # type: ignore[arg-type]
    started = time.monotonic()
    with pytest.raises(RuntimeError), patcher.batch() as batch:
        batch.submit(request("gpu-1"))
        while not core.calls:
            time.sleep(0.01)
        raise RuntimeError("a refusal settled on the pass's thread")
    # Not the 30 s the 429 asked: the patch gave up its wait when the batch was left.
    assert time.monotonic() - started < 10
    assert len(core.calls) == 1
