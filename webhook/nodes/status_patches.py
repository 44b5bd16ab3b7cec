"""Sending the advertiser's patches of `nodes/status`: several at a time, within client-side
rate limits, and waiting as long as a 429 Too Many Requests asks.

One patch at a time costs a round trip per node: about 150 a second on a real apiserver, over
five minutes for a pool of 50,000 nodes. `PatchBatch` keeps at most `concurrency` in flight on
a pool of threads that only send; the caller plans each node and settles each answer on its
own thread, so the advertiser's state has one writer. A 429 pauses every sender, as long as
its Retry-After says (capped), and the patch is sent again, up to client-go's ten retries.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from webhook.kube import raw_json
from webhook.kube.rate_limit import TokenBucket
from webhook.nodes.node_plan import Advertise, NodeView, Withdraw
from webhook.nodes.patch_limits import PatchLimits

JSON_PATCH = "application/json-patch+json"
PATCH_TIMEOUT = (5.0, 10.0)
HTTP_TOO_MANY_REQUESTS = 429
TOO_MANY_RETRIES = 10
RETRY_AFTER_DEFAULT = 1.0
RETRY_AFTER_MAX = 30.0
# How soon a patch waiting for its turn sees that its batch was abandoned.
GIVE_UP_POLL_SECONDS = 0.1


@dataclass(frozen=True)
class PatchRequest:
    node: NodeView
    operations: list[dict[str, Any]]
    changes: Mapping[str, Advertise | Withdraw]


@dataclass(frozen=True)
class PatchDone:
    """The node as the API stored it, or the error that the patch ended with."""

    request: PatchRequest
    patched: Mapping[str, Any] | None = None
    error: BaseException | None = None


class Stopped(Exception):
    """The advertiser stopped while the patch waited for its turn."""


class StatusPatcher:
    def __init__(
        self,
        core: CoreV1Api,
        limits: PatchLimits,
        *,
        stopping: threading.Event | None = None,
    ) -> None:
        self._core = core
        self.limits = limits
        self._bucket = TokenBucket(limits.qps, limits.burst)
        self._stopping = stopping or threading.Event()
        # Set while a batch left by an exception waits for its patches under way: those that
        # wait for their turn, or out a 429, give up instead.
        self._abandoned = threading.Event()

    def send(self, request: PatchRequest) -> PatchDone:
        """One patch, waiting its turn and out any 429s; every error is in the answer."""
        try:
            return PatchDone(request, patched=self._send(request))
        except Exception as error:
            return PatchDone(request, error=error)

    def _send(self, request: PatchRequest) -> Mapping[str, Any]:
        retries = 0
        while True:
            if self._abandoned.is_set() or not self._bucket.take(self._wait):
                raise Stopped("stopping")
            try:
                return raw_json.call(
                    self._core.patch_node_status,
                    request.node.name,
                    request.operations,
                    _content_type=JSON_PATCH,
                    _request_timeout=PATCH_TIMEOUT,
                )
            except ApiException as error:
                if error.status != HTTP_TOO_MANY_REQUESTS or retries >= TOO_MANY_RETRIES:
                    raise
                retries += 1
                self._bucket.pause(retry_after(error))

    def _wait(self, seconds: float) -> bool:
        """Wait for a turn; True when the patch should not be sent after all."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._stopping.wait(min(left, GIVE_UP_POLL_SECONDS)) or self._abandoned.is_set():
                return True
        return self._abandoned.is_set()

    @contextmanager
    def batch(self) -> Iterator[PatchBatch]:
        """Patches sent `concurrency` at a time until the block ends. Leaving it early (an
        exception) drops those not yet sent, and waits only for the requests on the wire: a
        patch waiting for its turn or out a 429 gives up, and no answer is taken in."""
        with ThreadPoolExecutor(self.limits.concurrency, thread_name_prefix="node-patch") as pool:
            batch = PatchBatch(pool, self.send, self.limits.concurrency)
            try:
                yield batch
            except BaseException:
                self._abandoned.set()
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
                self._abandoned.clear()


class PatchBatch:
    def __init__(
        self,
        pool: ThreadPoolExecutor,
        send: Callable[[PatchRequest], PatchDone],
        concurrency: int,
    ) -> None:
        self._pool = pool
        self._send = send
        self._concurrency = concurrency
        self._flying: set[Future[PatchDone]] = set()

    def submit(self, request: PatchRequest) -> list[PatchDone]:
        """Send `request` once fewer than `concurrency` are in flight; the answers that came
        meanwhile, for the caller to settle."""
        done = self._landed(block=len(self._flying) >= self._concurrency)
        self._flying.add(self._pool.submit(self._send, request))
        return done

    def finish(self) -> list[PatchDone]:
        """The answers to every patch still in flight, once all have come."""
        finished = wait(self._flying)
        self._flying.clear()
        return [future.result() for future in finished.done]

    def _landed(self, *, block: bool) -> list[PatchDone]:
        if block:
            landed = wait(self._flying, return_when=FIRST_COMPLETED).done
        else:
            landed = {future for future in self._flying if future.done()}
        self._flying -= landed
        return [future.result() for future in landed]


def retry_after(error: ApiException) -> float:
    """The seconds a 429 asks the client to wait (a whole number, as the apiserver sends)."""
    headers = error.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        seconds = float(value) if value is not None else RETRY_AFTER_DEFAULT
    except ValueError:
        seconds = RETRY_AFTER_DEFAULT
    if math.isnan(seconds):
        seconds = RETRY_AFTER_DEFAULT
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)
