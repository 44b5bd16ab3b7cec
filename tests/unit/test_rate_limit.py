"""The client-side token bucket: `burst` calls at once, then one each 1/qps, refilled by time up
to `burst`, and a pause (a 429's Retry-After) that holds every caller and accrues nothing."""

from __future__ import annotations

import pytest

from webhook.kube.rate_limit import TokenBucket


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingWait:
    """A `wait` that passes the asked seconds on the fake clock at once; `stopping` answers
    True (the caller is stopping) instead."""

    def __init__(self, clock: FakeClock, *, stopping: bool = False) -> None:
        self.clock = clock
        self.stopping = stopping
        self.asked: list[float] = []

    def __call__(self, seconds: float) -> bool:
        self.asked.append(seconds)
        if self.stopping:
            return True
        self.clock.advance(seconds)
        return False


def bucket(qps: float, burst: int) -> tuple[TokenBucket, FakeClock, RecordingWait]:
    clock = FakeClock()
    return TokenBucket(qps, burst, clock=clock), clock, RecordingWait(clock)


def take_times(limiter: TokenBucket, wait: RecordingWait, times: int) -> list[bool]:
    return [limiter.take(wait) for _ in range(times)]


@pytest.mark.parametrize(
    ("qps", "burst"),
    [
        pytest.param(10.0, 1, id="10 qps, burst 1"),
        pytest.param(10.0, 5, id="10 qps, burst 5"),
        pytest.param(0.5, 3, id="a call each 2 s, burst 3"),
    ],
)
def test_burst_calls_pass_without_waiting_and_the_next_waits_one_over_qps(
    qps: float, burst: int
) -> None:
    limiter, _, wait = bucket(qps, burst)
    assert take_times(limiter, wait, burst) == [True] * burst
    assert wait.asked == []
    assert limiter.take(wait) is True
    assert wait.asked == [pytest.approx(1 / qps)]


def test_calls_past_the_burst_go_one_each_one_over_qps() -> None:
    limiter, clock, wait = bucket(4.0, 2)
    start = clock.now
    times = []
    for _ in range(6):
        limiter.take(wait)
        times.append(clock.now - start)
    assert times == pytest.approx([0.0, 0.0, 0.25, 0.5, 0.75, 1.0])


@pytest.mark.parametrize(
    ("quiet", "free_calls"),
    [
        pytest.param(0.25, 1, id="one call's worth of quiet"),
        pytest.param(0.625, 2, id="two and a half calls' worth"),
        pytest.param(0.75, 3, id="exactly the burst"),
        pytest.param(3600.0, 3, id="an hour: no more than the burst"),
    ],
)
def test_tokens_refill_with_time_up_to_the_burst_only(quiet: float, free_calls: int) -> None:
    # 4 qps: a call's worth of time is a quarter second, exact in binary.
    limiter, clock, wait = bucket(4.0, 3)
    take_times(limiter, wait, 3)
    clock.advance(quiet)
    take_times(limiter, wait, free_calls)
    assert wait.asked == []
    limiter.take(wait)
    assert len(wait.asked) == 1
    assert wait.asked[0] > 0


@pytest.mark.parametrize("qps", [0.0, -1.0], ids=["qps 0", "negative qps"])
def test_a_qps_of_zero_or_less_never_waits_for_rate(qps: float) -> None:
    limiter, _, wait = bucket(qps, 1)
    assert take_times(limiter, wait, 1000) == [True] * 1000
    assert wait.asked == []


@pytest.mark.parametrize(
    "qps",
    [pytest.param(0.0, id="no rate limit"), pytest.param(100.0, id="a rate with tokens to spare")],
)
def test_pause_makes_the_next_take_wait_the_seconds_asked(qps: float) -> None:
    limiter, clock, wait = bucket(qps, 50)
    start = clock.now
    limiter.pause(2.0)
    assert limiter.take(wait) is True
    assert wait.asked == [pytest.approx(2.0)]
    assert clock.now - start == pytest.approx(2.0)


def test_a_pause_past_its_end_makes_no_take_wait() -> None:
    limiter, clock, wait = bucket(0.0, 1)
    limiter.pause(2.0)
    clock.advance(2.5)
    assert limiter.take(wait) is True
    assert wait.asked == []


def test_a_shorter_pause_does_not_cut_a_longer_one_short() -> None:
    limiter, _, wait = bucket(0.0, 1)
    limiter.pause(5.0)
    limiter.pause(1.0)
    limiter.take(wait)
    assert sum(wait.asked) == pytest.approx(5.0)


@pytest.mark.parametrize(
    ("paused", "waits"),
    [
        pytest.param(False, [], id="a quiet spell without a pause refills the burst"),
        pytest.param(True, [1.0, 1.0], id="a pause of as long leaves one call, at its end"),
    ],
)
def test_no_more_than_one_token_is_left_after_a_pause(paused: bool, waits: list[float]) -> None:
    limiter, clock, wait = bucket(1.0, 3)
    if paused:
        limiter.pause(5.0)
    clock.advance(5.0)
    take_times(limiter, wait, 3)
    assert wait.asked == pytest.approx(waits)


def test_a_pause_that_comes_while_a_caller_waits_holds_it_too() -> None:
    limiter, clock, recording = bucket(1.0, 1)
    limiter.take(recording)

    def wait(seconds: float) -> bool:
        if not recording.asked:
            limiter.pause(3.0)  # a 429 to another caller, while this one waits for its token
        return recording(seconds)

    start = clock.now
    assert limiter.take(wait) is True
    assert clock.now - start == pytest.approx(3.0)
    assert recording.asked == pytest.approx([1.0, 2.0])


@pytest.mark.parametrize(
    "pause",
    [pytest.param(0.0, id="waiting for the rate"), pytest.param(5.0, id="waiting out a pause")],
)
def test_a_wait_that_says_stopping_makes_take_return_false(pause: float) -> None:
    limiter, clock, _ = bucket(1.0, 1)
    stopping = RecordingWait(clock, stopping=True)
    assert limiter.take(stopping) is True  # the burst: no wait asked, so no stop seen
    assert stopping.asked == []
    if pause:
        limiter.pause(pause)
    assert limiter.take(stopping) is False
    assert len(stopping.asked) == 1


def test_a_wait_that_says_stopping_during_a_later_pause_makes_take_return_false() -> None:
    limiter, clock, _ = bucket(1.0, 1)
    limiter.take(RecordingWait(clock))
    calls: list[float] = []

    def wait(seconds: float) -> bool:
        calls.append(seconds)
        if len(calls) == 1:
            limiter.pause(3.0)
            clock.advance(seconds)
            return False
        return True

    assert limiter.take(wait) is False
    assert len(calls) == 2


@pytest.mark.parametrize("burst", [0, -1], ids=["burst 0", "negative burst"])
def test_a_burst_below_one_raises_value_error(burst: int) -> None:
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(10.0, burst, clock=FakeClock())


def test_callers_queued_during_a_pause_leave_one_per_token_after_it() -> None:
    limiter, _, wait = bucket(1.0, 1)
    limiter.take(wait)
    limiter.pause(10.0)
    # Five callers take their turn during the pause; each stops at once, its wait recorded.
    delays: list[float] = []
    for _ in range(5):
        limiter.take(lambda seconds: delays.append(seconds) or True)
    assert delays == pytest.approx([10.0, 11.0, 12.0, 13.0, 14.0])
