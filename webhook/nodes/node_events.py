"""core/v1 Events about the nodes the advertiser changes or skips, so that `kubectl describe node`
shows them. An Event about a cluster-scoped object lives in namespace `default`. Events are a
courtesy: when the API refuses them, that is logged once and the advertiser goes on.

They are sent by a thread of their own from a bounded queue, at most `EVENT_QPS` a second, as
client-go's broadcaster sends them within its client's rate limit: a first pass that patches
50,000 nodes neither waits for 50,000 Events, nor spends on them what the patches need, nor
holds them. What does not fit the queue is dropped and counted; `close()` sends what is queued,
for a bounded time.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from webhook.kube import raw_json
from webhook.kube.api_errors import HTTP_FORBIDDEN, short_reason
from webhook.kube.rate_limit import TokenBucket

log = logging.getLogger("webhook")

EVENT_NAMESPACE = "default"
COMPONENT = "gpu-vram-advertiser"
EVENT_TIMEOUT = (5.0, 5.0)
MESSAGE_LIMIT = 1024
# client-go's broadcaster holds 1,000 events before it drops them.
QUEUE_LIMIT = 1000
EVENT_QPS = 20.0
EVENT_BURST = 100
IDLE_POLL_SECONDS = 0.2
# The longest an Event's POST may take once started (EVENT_TIMEOUT's connect and read).
SEND_TIMEOUT_SECONDS = 10.0


class NodeEvents:
    def __init__(self, core: CoreV1Api, identity: str, *, queue_limit: int = QUEUE_LIMIT) -> None:
        self._core = core
        self._identity = identity
        self._broken = False
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(queue_limit)
        self._dropped = 0
        self._sender: threading.Thread | None = None
        self._sender_lock = threading.Lock()
        self._bucket = TokenBucket(EVENT_QPS, EVENT_BURST)
        self._finishing = threading.Event()
        self._finish_by = float("inf")

    def close(self, timeout: float) -> None:
        """Send what is queued for at most `timeout` seconds, then drop the rest. The sender has
        ended when this returns, at most one Event's POST (EVENT_TIMEOUT) after the deadline: a
        thread still sending at interpreter exit may abort it."""
        sender = self._sender
        if sender is None:
            return
        self._finish_by = time.monotonic() + timeout
        self._finishing.set()
        sender.join(timeout + SEND_TIMEOUT_SECONDS)
        dropped = self._dropped + self._queue.qsize()
        if dropped:
            log.warning("nodes: %d events about nodes were dropped (too many at once)", dropped)

    def advertised(self, node: str, message: str) -> None:
        self._record(node, "Normal", "VRAMAdvertised", message)

    def skipped(self, node: str, message: str) -> None:
        self._record(node, "Warning", "VRAMNotAdvertised", message)

    def _record(self, node: str, kind: str, reason: str, message: str) -> None:
        if self._broken:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{node}.{uuid.uuid4().hex[:16]}", "namespace": EVENT_NAMESPACE},
            # The kubelet, too, names a node's uid by its name in the events it records.
            "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": node, "uid": node},
            "type": kind,
            "reason": reason,
            "message": message[:MESSAGE_LIMIT],
            "source": {"component": COMPONENT, "host": self._identity},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._identity,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._start_sender()
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self._dropped += 1

    def _start_sender(self) -> None:
        with self._sender_lock:
            if self._sender is None:
                self._sender = threading.Thread(
                    target=self._send_queued, name="node-events", daemon=True
                )
                self._sender.start()

    def _send_queued(self) -> None:
        while not (self._finishing.is_set() and self._queue.empty()):
            try:
                body = self._queue.get(timeout=IDLE_POLL_SECONDS)
            except queue.Empty:
                continue
            if self._broken:
                continue
            late = self._finishing.is_set() and time.monotonic() >= self._finish_by
            if late or not self._bucket.take(self._wait_in_time):
                self._dropped += 1  # its turn comes after close()'s deadline
                return
            self._send(body)

    def _wait_in_time(self, seconds: float) -> bool:
        """Wait `seconds` for the next event's turn; True, without waiting on, when its turn
        comes after close()'s deadline."""
        started = time.monotonic()
        if not self._finishing.wait(seconds):
            return False
        left = seconds - (time.monotonic() - started)
        if time.monotonic() + left > self._finish_by:
            return True
        time.sleep(max(left, 0.0))
        return False

    def _send(self, body: dict[str, Any]) -> None:
        node = body["involvedObject"]["name"]
        try:
            raw_json.call(
                self._core.create_namespaced_event,
                EVENT_NAMESPACE,
                body,
                _request_timeout=EVENT_TIMEOUT,
            )
        except ApiException as error:
            if error.status != HTTP_FORBIDDEN:
                log.debug("nodes: an event about node %s was lost: %s", node, short_reason(error))
                return
            self._broken = True
            log.warning(
                "nodes: events about nodes cannot be recorded (%s); going on without them "
                "(grant create on events in namespace %s)",
                short_reason(error),
                EVENT_NAMESPACE,
            )
        except Exception as error:  # events are a courtesy; the patch is what counts
            log.debug("nodes: an event about node %s was lost: %s", node, short_reason(error))
