"""Hypothesis settings for the fuzz suite, applied to its own tests only: loading a profile
would change the defaults of every other property test in the session.

`CI` is what pytest runs (`make test`, and CI on a clean clone): derandomized, so every run
judges the same cases and a failure reproduces anywhere, with no example database, no
deadline (a pod of 500 containers takes milliseconds, not microseconds) and no health checks
about large or slow examples, which this suite makes on purpose. `SOAK` is what
`python -m tests.fuzz.soak` runs: random, batch after batch, shrinking what fails.
`FUZZ_SCALE` (a number, default 1) multiplies the examples of every pytest fuzz test.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_QUIET = list(HealthCheck)

settings.register_profile(
    "fuzz-ci",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=_QUIET,
    print_blob=False,
)
settings.register_profile(
    "fuzz-soak",
    derandomize=False,
    database=None,
    deadline=None,
    suppress_health_check=_QUIET,
    print_blob=False,
    phases=(Phase.generate, Phase.shrink),
    report_multiple_bugs=False,
)
CI = settings.get_profile("fuzz-ci")
SOAK = settings.get_profile("fuzz-soak")


def examples(count: int) -> int:
    """`count` examples for a pytest fuzz test, scaled by FUZZ_SCALE."""
    scale = float(os.environ.get("FUZZ_SCALE", "1") or 1)
    return max(1, round(count * scale))


def ci(count: int) -> settings:
    """The CI settings with `count` examples (scaled)."""
    return settings(CI, max_examples=examples(count))
