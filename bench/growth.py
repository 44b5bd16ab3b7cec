"""How the decision grows: with the containers of a pod, and with the policies of a set."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.decision import answer_of, time_decision
from bench.policy_sets import GeneratedSet, write_policy_set
from bench.scenarios import answer_problem, in_namespace, on_card, with_containers
from bench.stats import ratio
from webhook.cli.admit import review_body
from webhook.policy.policy_set import PolicySet
from webhook.policy.store import load_directory

CONTAINER_COUNTS = (1, 10, 100)
# A pod's shares must fit the one card they share, each with room for a CUDA context: a
# hundred of 10m of an A100 80GB (819 MiB each) do.
GROWTH_SHARE = "10m"
GROWTH_MODEL = "NVIDIA-A100-SXM4-80GB"
POLICY_COUNTS = (1, 100, 1000)

# Told each case's label and figures as it is measured.
Progress = Callable[[str, Mapping[str, Any]], None]


class WrongAnswer(Exception):
    """A case whose answer does not have the expected shape: timing it would mislead."""


def checked_body(
    review: Mapping[str, Any], policies: PolicySet, label: str
) -> tuple[bytes, dict[str, Any]]:
    """The review's body, and its answer, checked to be a patch."""
    body = review_body(review)
    answer = answer_of(body, policies)
    problem = answer_problem("patched", review["request"]["uid"], answer)
    if problem:
        raise WrongAnswer(f"{label}: {problem}")
    return body, answer


def container_growth(
    pod: Mapping[str, Any], policies: PolicySet, seconds: float, progress: Progress
) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for count in CONTAINER_COUNTS:
        label = f"{count} container{'s' if count > 1 else ''}"
        grown = with_containers(on_card(pod, GROWTH_MODEL, GROWTH_SHARE), count)
        body, _ = checked_body(grown, policies, label)
        cases[str(count)] = time_decision(body, policies, seconds).figures()
        progress(label, cases[str(count)])
    return {"cases": cases, **container_slopes(cases)}


def container_slopes(cases: Mapping[str, Any]) -> dict[str, float | None]:
    """Per-container cost from 1 to 10 containers and from 10 to 100, in µs of median decision
    time; linear growth keeps the second slope near the first."""
    first, tenth, hundredth = (cases[str(n)]["decide_us"]["median"] for n in CONTAINER_COUNTS)
    slope_1_10 = (tenth - first) / (CONTAINER_COUNTS[1] - CONTAINER_COUNTS[0])
    slope_10_100 = (hundredth - tenth) / (CONTAINER_COUNTS[2] - CONTAINER_COUNTS[1])
    return {
        "slope_1_10_us": slope_1_10,
        "slope_10_100_us": slope_10_100,
        "slope_ratio": ratio(slope_10_100, slope_1_10),
        "ratio_100_over_1": ratio(hundredth, first),
    }


def load_generated(size: int, directory: Path) -> tuple[GeneratedSet, PolicySet, float]:
    """Write a set of `size` policies and load it through the server's own loader."""
    generated = write_policy_set(size, directory)
    started = time.perf_counter()
    attempt = load_directory(directory)
    seconds = time.perf_counter() - started
    if attempt.policy_set is None:
        problems = "; ".join(str(problem) for problem in attempt.problems[:3])
        raise WrongAnswer(f"the generated set of {size} policies does not load: {problems}")
    return generated, attempt.policy_set, seconds


def policy_growth(
    pod: Mapping[str, Any],
    seconds: float,
    progress: Progress,
    counts: Sequence[int] = POLICY_COUNTS,
) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for size in counts:
        with tempfile.TemporaryDirectory(prefix="bench-policies-") as folder:
            generated, policies, load_seconds = load_generated(size, Path(folder))
        label = f"{size} polic{'ies' if size > 1 else 'y'}"
        case: dict[str, Any] = {"load_s": load_seconds}
        for key, namespace, expected in (
            ("glob", generated.namespace, generated.policy),
            ("exact", generated.exact_namespace, generated.exact_policy),
        ):
            review = in_namespace(pod, namespace)
            body, answer = checked_body(review, policies, f"{label}, namespace {namespace}")
            governing = answer["response"]["auditAnnotations"]["policy"]
            if governing != expected:
                raise WrongAnswer(
                    f"{label}: {namespace} is governed by {governing}, not {expected}"
                )
            timing = time_decision(body, policies, seconds).figures()
            case[key] = {"namespace": namespace, "policy": expected, **timing}
        cases[str(size)] = case
        progress(label, case)
    return {
        "cases": cases,
        "ratio": _growth(cases, counts, "glob"),
        "exact_ratio": _growth(cases, counts, "exact"),
    }


def _growth(cases: Mapping[str, Any], counts: Sequence[int], key: str) -> float | None:
    """Median decision time with the most policies ÷ with the fewest."""
    first, last = (cases[str(n)][key]["decide_us"]["median"] for n in (counts[0], counts[-1]))
    return ratio(last, first)
