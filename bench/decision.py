"""The admission decision timed in this process, without HTTP: decoding the body apart from
judging the review and encoding the answer, the two halves of what the route does."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from bench.stats import median, percentile
from webhook.admission.answer import judge
from webhook.admission.review import ReviewEnvelope, decode_envelope
from webhook.cli.admit import admit
from webhook.policy.namespace_labels import NoCluster
from webhook.policy.policy_set import PolicySet

NO_CLUSTER = NoCluster()
# Iterations timed first to estimate how many fit in the time given to a case.
_CALIBRATION = 20
_MIN_ITERATIONS = 200


def decide_and_encode(envelope: ReviewEnvelope, policies: PolicySet) -> bytes:
    """What the /mutate route does after decoding the body: judge, then encode the answer."""
    return judge(envelope, policies, "mutate", NO_CLUSTER, _raise_fault).body()


def answer_of(body: bytes, policies: PolicySet) -> dict[str, Any]:
    """The answer to `body`, to check its shape before it is timed (a fault is a denial that
    names it, as offline)."""
    return json.loads(admit(body, policies, "mutate", NO_CLUSTER).body())


def _raise_fault(envelope: ReviewEnvelope, error: Exception) -> str:
    # The server answers a fault with a denial; timing one would time the wrong thing.
    raise error


@dataclass(frozen=True)
class Timing:
    iterations: int
    decode_us: list[float]
    decide_us: list[float]

    def figures(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations,
            "decode_us": _summary(self.decode_us),
            "decide_us": _summary(self.decide_us),
        }


def _summary(samples: list[float]) -> dict[str, float]:
    return {"median": median(samples), "p99": percentile(samples, 99)}


def time_decision(body: bytes, policies: PolicySet, seconds: float) -> Timing:
    """Decode `body` and decide on it over and over for about `seconds`, timing each half of
    every iteration. Every iteration decodes afresh, as every request does; gc stays on."""
    calibration = _run(body, policies, _CALIBRATION)
    per_iteration_ns = 1000 * (sum(calibration.decode_us) + sum(calibration.decide_us))
    estimate = seconds * 1e9 / max(per_iteration_ns / _CALIBRATION, 1.0)
    return _run(body, policies, max(_MIN_ITERATIONS, int(estimate)))


def _run(body: bytes, policies: PolicySet, iterations: int) -> Timing:
    clock = time.perf_counter_ns
    decode_us: list[float] = []
    decide_us: list[float] = []
    for _ in range(iterations):
        started = clock()
        envelope = decode_envelope(body)
        decoded = clock()
        decide_and_encode(envelope, policies)
        decided = clock()
        decode_us.append((decoded - started) / 1000)
        decide_us.append((decided - decoded) / 1000)
    return Timing(iterations, decode_us, decide_us)
