"""Client-side rate limits on calls to the Kubernetes API, as client-go's token bucket: `qps`
calls a second on average, `burst` at once after a quiet spell, and a pause when the API answers
429 Too Many Requests with a Retry-After.

A qps of 0 or less leaves calls unlimited by rate, as client-go's does for a negative QPS; the
apiserver's priority and fairness then answer 429 when it is busy, and the pause still holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# Waits `seconds`; True when the caller is stopping and should not make the call.
Wait = Callable[[float], bool]


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


class TokenBucket:
    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(burst)
        self._updated = clock()
        self._paused_until = 0.0

    def take(self, wait: Wait = _sleep) -> bool:
        """Wait for leave to make one call; False when `wait` says the caller is stopping."""
        with self._lock:
            now = self._clock()
            if self.qps > 0:
                if now > self._updated:  # no tokens accrue during a pause
                    elapsed = now - self._updated
                    self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
                    self._updated = now
                # Taken now, paid for by waiting: callers queue in the order they came. Tokens
                # accrue from `_updated`, which a pause moves to its end: a debt is paid after it.
                self._tokens -= 1
                debt = -self._tokens / self.qps if self._tokens < 0 else 0.0
                delay = self._updated + debt - now
            else:
                delay = 0.0
            delay = max(delay, self._paused_until - now, 0.0)
        if delay > 0 and wait(delay):
            return False
        # A 429 that came while this caller waited pauses it too.
        while (left := self._paused_until - self._clock()) > 0:
            if wait(left):
                return False
        return True

    def pause(self, seconds: float) -> None:
        """No call for `seconds` from now (a 429's Retry-After), then the rate again."""
        with self._lock:
            now = self._clock()
            self._paused_until = max(self._paused_until, now + seconds)
            self._tokens = 1.0  # one call at the end of the pause, then the rate
            self._updated = max(self._updated, self._paused_until)
