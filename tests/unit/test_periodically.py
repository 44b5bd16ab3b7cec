"""An action every interval on a thread of its own, a last act on stop when asked for, and a
repeating fault logged once."""

from __future__ import annotations

import logging
import time
from itertools import pairwise

import pytest

from tests.support.waiting import eventually
from webhook.periodically import Periodically

INTERVAL = 0.05


def test_periodically_acts_every_interval() -> None:
    actions: list[float] = []
    periodic = Periodically(
        INTERVAL,
        lambda: actions.append(time.monotonic()),
        "acting",
        thread_name="t",
        last_act=False,
    )
    periodic.start()
    eventually(lambda: len(actions) >= 3)
    periodic.stop()
    assert periodic._thread is not None and not periodic._thread.is_alive()
    stopped_with = len(actions)
    assert stopped_with >= 3
    # A thread that did not wait between acts would act far more often.
    assert all(later - earlier >= INTERVAL * 0.8 for earlier, later in pairwise(actions))
    time.sleep(INTERVAL * 3)
    assert len(actions) == stopped_with


@pytest.mark.parametrize(("last_act", "acts"), [(True, 1), (False, 0)])
def test_stopping_acts_a_last_time_when_asked_to_and_only_once(last_act: bool, acts: int) -> None:
    actions: list[int] = []
    # An interval no test waits for: every act here comes from stop.
    periodic = Periodically(
        3600, lambda: actions.append(1), "acting", thread_name="t", last_act=last_act
    )
    periodic.start()
    periodic.stop()
    periodic.stop()
    assert len(actions) == acts


def test_a_failing_action_is_logged_once_and_keeps_being_tried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tries: list[int] = []

    def fail() -> None:
        tries.append(1)
        raise OSError("No space left on device")

    periodic = Periodically(0.02, fail, "test-failing", thread_name="t", last_act=False)
    with caplog.at_level(logging.ERROR, logger="webhook"):
        periodic.start()
        eventually(lambda: len(tries) >= 3)
        periodic.stop()
    assert len(tries) >= 3
    faults = [r for r in caplog.records if r.getMessage() == "test-failing failed"]
    assert len(faults) == 1 and faults[0].exc_info is not None
