"""Node Events leave from a bounded queue on a thread of their own, within a rate, and `close()`
ends that thread by its deadline, dropping (and counting) what has not gone."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from webhook.nodes import node_events
from webhook.nodes.node_events import NodeEvents


class Answer:
    def __init__(self, body: Any) -> None:
        self.data = json.dumps(body).encode()


class RecordingCore:
    """`create_namespaced_event` as the API answers it: the Event, or the `refusal` given."""

    def __init__(self, refusal: int | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.refusal = refusal
        self.lock = threading.Lock()

    def create_namespaced_event(self, namespace: str, body: dict[str, Any], **_: Any) -> Answer:
        if self.refusal is not None:
            raise ApiException(status=self.refusal, reason="refused")
        with self.lock:
            self.sent.append(body)
        return Answer(body)


def test_queued_events_are_sent_before_close_returns_and_the_sender_ends() -> None:
    core = RecordingCore()
    events = NodeEvents(core, "advertiser-a")  # type: ignore[arg-type]
    for index in range(5):
        events.advertised(f"node-{index}", "example.com/vram=15360")
    events.skipped("node-9", "labels unreadable")
    events.close(5.0)
    assert [body["involvedObject"]["name"] for body in core.sent] == [
        *(f"node-{index}" for index in range(5)),
        "node-9",
    ]
    assert [body["reason"] for body in core.sent][-2:] == ["VRAMAdvertised", "VRAMNotAdvertised"]
    assert not any(thread.name == "node-events" for thread in threading.enumerate())


def test_events_past_the_queue_are_dropped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    core = RecordingCore()
    events = NodeEvents(core, "advertiser-a", queue_limit=2)  # type: ignore[arg-type]
    blocked = threading.Event()
    original = core.create_namespaced_event

    def slow(namespace: str, body: dict[str, Any], **options: Any) -> Answer:
        blocked.wait(5)
        return original(namespace, body, **options)

    core.create_namespaced_event = slow  # type: ignore[method-assign]
    for index in range(10):
        events.advertised(f"node-{index}", "changed")
    blocked.set()
    with caplog.at_level(logging.WARNING, logger="webhook"):
        events.close(5.0)
    # One taken by the sender before it blocked, two queued: seven dropped, at most.
    assert 2 <= len(core.sent) <= 3
    (warning,) = [record.getMessage() for record in caplog.records]
    assert (
        warning
        == f"nodes: {10 - len(core.sent)} events about nodes were dropped (too many at once)"
    )


def test_close_keeps_its_deadline_when_the_rate_holds_events_back(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(node_events, "EVENT_QPS", 2.0)
    monkeypatch.setattr(node_events, "EVENT_BURST", 3)
    core = RecordingCore()
    events = NodeEvents(core, "advertiser-a")  # type: ignore[arg-type]
    for index in range(20):
        events.advertised(f"node-{index}", "changed")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="webhook"):
        events.close(1.0)
    assert time.monotonic() - started < 1.0 + 2.0  # twenty events at 2/s would take 9 s
    # The burst, and what two a second allow within the second close() gave.
    assert 3 <= len(core.sent) <= 6
    assert caplog.records[-1].getMessage().startswith(f"nodes: {20 - len(core.sent)} events")
    assert not any(thread.name == "node-events" for thread in threading.enumerate())


def test_events_refused_for_rbac_stop_being_sent_and_say_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = RecordingCore(refusal=403)
    events = NodeEvents(core, "advertiser-a")  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="webhook"):
        for index in range(3):
            events.advertised(f"node-{index}", "changed")
        events.close(5.0)
    refusals = [r for r in caplog.records if "cannot be recorded" in r.getMessage()]
    assert len(refusals) == 1
    assert core.sent == []
