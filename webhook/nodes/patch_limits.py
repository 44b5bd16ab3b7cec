"""How hard the advertiser may write to the API, apart from the code that writes (which needs
the kubernetes client, which the command line's parser does not import)."""

from __future__ import annotations

from dataclasses import dataclass

# A pool of 50,000 nodes patched in under a minute; the apiserver's priority and fairness
# answer 429 long before this hurts it, and a 429 pauses every sender.
DEFAULT_QPS = 1000.0
DEFAULT_BURST = 1000
DEFAULT_CONCURRENCY = 16


@dataclass(frozen=True)
class PatchLimits:
    """`qps` patches a second (0: no client-side limit), `burst` at once after a quiet spell,
    `concurrency` in flight."""

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    concurrency: int = DEFAULT_CONCURRENCY
