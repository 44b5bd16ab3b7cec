"""The long run of the in-process fuzz properties: `python -m tests.fuzz.soak [--cases N]`.

Generates N cases (default 100,000) of every family in tests/fuzz/strategies.py, in batches
of fresh random Hypothesis runs, and checks every property of tests/fuzz/properties.py on each.
It prints the cases run, the rate, the answers seen (HTTP status, verdict and denial code) and
the longest case, and exits 1 on the first property that fails, after Hypothesis has shrunk
the failing case. The shrunk case is written where the suite runs it:

- a review that fails alone: tests/scenarios/fuzz-found/<property>-<digest>/, a scenario folder
  (review.json, expected.yaml saying what the answer should have been, mutated.json and
  policies/ when needed), kept only once `webhook test`'s checks are seen to fail on it;
- anything else (a body that is no review, a failure that needs a sibling judged first, or a
  review whose failure its JSON text does not keep): tests/fuzz/regressions/<...>.json, which
  tests/fuzz/test_regressions.py replays. A failure that depends on what the webhook's caches
  kept from earlier cases is written with the earlier case that leads to it, found among the
  last cases run by judging each before it, by policies loaded afresh.

`--seed` sets the seeds of the Hypothesis runs (the first, then one more for each batch);
`--batch` sets the cases per run; `--keep-going` counts failures by property and goes on, for
the figures of a whole run while known bugs stand (it exits 1 if any failed).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import shutil
import sys
import time
import traceback
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, seed, settings

from tests.fuzz.profiles import SOAK
from tests.fuzz.properties import PropertyFailure, check_case, fresh_policy_set, review_in
from tests.fuzz.strategies import NAMESPACE_LABELS, POLICY_DIRS, REPO_ROOT, Case, cases
from webhook.cli.runner import run_case
from webhook.cli.scenario_folders import load_scenario
from webhook.policy.policy_set import PolicySet

SCENARIO_ROOT = REPO_ROOT / "tests" / "scenarios"
FOUND_SCENARIOS = SCENARIO_ROOT / "fuzz-found"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"
DEFAULT_CASES = 100_000
DEFAULT_BATCH = 2_000
# The cases kept to find the one that leads to a failure through the webhook's caches (the
# shrinking alone may run thousands).
HISTORY = 5000


@dataclass
class Tally:
    cases: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    families: Counter[str] = field(default_factory=Counter)
    longest: float = 0.0
    longest_case: str = ""
    # The last failing case seen, and its error: Hypothesis runs the shrunk case last.
    failure: tuple[Case, BaseException] | None = None
    history: deque[Case] = field(default_factory=lambda: deque(maxlen=HISTORY))
    # --keep-going: the smallest failing case of each property, as generated.
    unshrunk: dict[str, tuple[Case, BaseException]] = field(default_factory=dict)

    def record(self, case: Case, answer: str, seconds: float) -> None:
        self.history.append(case)
        self.cases += 1
        self.answers[answer] += 1
        self.families[case.family] += 1
        if seconds > self.longest:
            self.longest = seconds
            self.longest_case = f"{case.family}, {len(case.body):,} bytes, answered {answer}"


def run_batch(tally: Tally, count: int, batch_seed: int, keep_going: bool = False) -> None:
    @seed(batch_seed)
    @settings(SOAK, max_examples=count)
    @given(cases())
    def batch(case: Case) -> None:
        started = time.perf_counter()
        try:
            answer = check_case(case)
        except Exception as error:
            if not keep_going:
                tally.cases += 1
                tally.failure = (case, error)
                tally.history.append(case)
                raise
            name = property_name(error)
            answer = f"FAILED {name}"
            smallest = tally.unshrunk.get(name)
            if smallest is None or len(case.body) < len(smallest[0].body):
                tally.unshrunk[name] = (case, error)
        tally.record(case, answer, time.perf_counter() - started)

    batch()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.soak", description=__doc__)
    parser.add_argument("--cases", type=int, default=DEFAULT_CASES, help="cases to run")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="cases per run")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first batch")
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="count failures by property and go on, neither shrinking nor writing them "
        "(for the figures of a long run while known bugs stand)",
    )
    options = parser.parse_args(argv)
    first_seed = options.seed if options.seed is not None else random.randrange(2**32)
    print(f"soak: {options.cases:,} cases in batches of {options.batch:,}, seed {first_seed}")
    tally = Tally()
    started = time.perf_counter()
    batch_number = 0
    failed: BaseException | None = None
    while tally.cases < options.cases:
        count = min(options.batch, options.cases - tally.cases)
        try:
            run_batch(tally, count, first_seed + batch_number, options.keep_going)
        except BaseException as error:  # the shrunk failure, as Hypothesis raises it
            if isinstance(error, KeyboardInterrupt):
                raise
            failed = error
            break
        batch_number += 1
        elapsed = time.perf_counter() - started
        print(f"  {tally.cases:,} cases, {elapsed:.0f} s", flush=True)
    report(tally, time.perf_counter() - started)
    for name, (case, error) in sorted(tally.unshrunk.items()):
        print(f"\nFAILED {name}, smallest case as generated: {first_line(error)}\n  {case!r}")
    if failed is None:
        return 1 if tally.unshrunk else 0
    print(f"\nsoak: FAILED in batch seeded {first_seed + batch_number}")
    case, error = tally.failure or (None, failed)
    print("".join(traceback.format_exception(error)).rstrip())
    if case is not None:
        print(f"\nthe shrunk case: {case!r}")
        before = None
        if isinstance(error, PropertyFailure) and error.alone is False:
            before = leading_case(case, error, list(tally.history)[:-1])
            shown = "none found" if before is None else repr(before)
            print(f"\nit fails only after another case; the one found: {shown}")
        written = write_found(case, error, before)
        if written is None:
            print(
                "\nnothing written: the case passes alone, and no case among the last "
                f"{HISTORY:,} leads to its failure; run again with --seed to look again"
            )
        else:
            print(f"\nwritten: {written.relative_to(REPO_ROOT)}")
    return 1


def report(tally: Tally, seconds: float) -> None:
    rate = tally.cases / seconds if seconds else 0.0
    print(f"\ncases run: {tally.cases:,} in {seconds:.1f} s ({rate:,.0f} cases/s)")
    print(f"longest case: {tally.longest * 1000:.1f} ms ({tally.longest_case})")
    print("answers seen:")
    for answer, count in sorted(tally.answers.items()):
        print(f"  {answer:<16} {count:>9,}")
    print("families: " + ", ".join(f"{k} {v:,}" for k, v in sorted(tally.families.items())))


# --- what a failure leaves behind ------------------------------------------------------------


def leading_case(case: Case, error: PropertyFailure, history: list[Case]) -> Case | None:
    """The latest earlier case after which `case` fails as it did, both judged by policies
    loaded afresh: what the webhook's caches keep from it is what `case` trips on."""
    tried: set[tuple[bytes, bytes | None, str]] = {(case.body, case.warmup, case.endpoint)}
    for before in reversed(history):
        seen = (before.body, before.warmup, before.endpoint)
        if before.policies != case.policies or seen in tried:
            continue
        tried.add(seen)
        policies = fresh_policy_set(case.policies)
        try:
            check_case(before, policies)
        except PropertyFailure:
            continue
        try:
            check_case(case, policies)
        except PropertyFailure as again:
            if again.name == error.name:
                return before
    return None


def write_found(case: Case, error: BaseException, before: Case | None = None) -> Path | None:
    name = property_name(error)
    digest = hashlib.sha256(case.body + (case.warmup or b"")).hexdigest()[:10]
    label = f"{name}-{digest}"
    review = review_in(case.body)
    alone = not isinstance(error, PropertyFailure) or error.alone is not False
    if review is not None and case.warmup is None and alone:
        folder = write_scenario(FOUND_SCENARIOS / label, case, review, error)
        if folder is not None:
            return folder
    if not alone and before is None:
        return None
    return write_regression(REGRESSIONS / f"{label}.json", case, error, before)


def property_name(error: BaseException) -> str:
    if isinstance(error, PropertyFailure):
        return error.name
    return "no-exception"  # an exception left the webhook's code: a 500 from the route


def case_record(case: Case) -> dict[str, Any]:
    record: dict[str, Any] = {
        "family": case.family,
        "endpoint": case.endpoint,
        "policies": case.policies,
        "content_type": case.content_type,
        "body": base64.b64encode(case.body).decode("ascii"),
    }
    if case.warmup is not None:
        record["warmup"] = base64.b64encode(case.warmup).decode("ascii")
    return record


def case_from_record(record: dict[str, Any]) -> Case:
    warmup = record.get("warmup")
    return Case(
        family=record["family"],
        body=base64.b64decode(record["body"]),
        endpoint=record["endpoint"],
        policies=record["policies"],
        content_type=record.get("content_type", "application/json"),
        warmup=None if warmup is None else base64.b64decode(warmup),
    )


def write_regression(
    path: Path, case: Case, error: BaseException, before: Case | None = None
) -> Path:
    """The case (and the case judged before it, if the failure needs one) as tests/fuzz/
    test_regressions.py replays it: each by the same policies, loaded afresh."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "property": property_name(error),
        "found": first_line(error),
        "before": [] if before is None else [case_record(before)],
        "case": case_record(case),
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def write_scenario(
    folder: Path, case: Case, review: dict[str, Any], error: BaseException
) -> Path | None:
    """The case as a scenario folder, kept only if `webhook test`'s checks fail on it."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    request = review["request"]
    sent = dict(review, _http={"path": f"/{case.endpoint}"})
    (folder / "review.json").write_text(json.dumps(sent, indent=2) + "\n")
    expected, mutated = expectation(case, review, error)
    namespace = request.get("namespace")
    if isinstance(namespace, str) and namespace in NAMESPACE_LABELS:
        expected["namespaceLabels"] = NAMESPACE_LABELS[namespace]
    (folder / "expected.yaml").write_text(yaml.safe_dump(expected, sort_keys=False, width=100))
    if mutated is not None:
        (folder / "mutated.json").write_text(json.dumps(mutated, indent=2) + "\n")
    if case.policies != "shipped":
        shutil.copytree(POLICY_DIRS[case.policies], folder / "policies")
    if fails_as_scenario(folder):
        return folder
    shutil.rmtree(folder)
    return None


def expectation(
    case: Case, review: dict[str, Any], error: BaseException
) -> tuple[dict[str, Any], Any]:
    """What the answer should have been, as far as the failed property says, and the object a
    patch should give (when one is expected). Where the property does not say, the expectation
    is the soak's guess, and its description says so."""
    name = property_name(error)
    found = first_line(error)
    guess = "The expectation is the soak's guess: check it, and correct it if it is wrong."
    obj = review["request"].get("object")
    if name == "extended-resource-rules":
        return {
            "description": f"Found by the soak: {found}. What the apiserver refuses must not be "
            f"let through. {guess}",
            "allowed": False,
        }, None
    if name in ("second-pass", "validate-allows", "patch-applies", "warnings", "echo"):
        patched = _patched_now(case, review)
        placeholder = patched is None
        description = f"Found by the soak: {found}."
        if placeholder:
            description += (
                " mutated.json holds the object as sent, a placeholder: once the patch applies, "
                "write there the object it should give."
            )
        return {
            "description": f"{description} {guess}",
            "allowed": True,
            "patched": True,
        }, obj if placeholder else patched
    if name == "at-once":
        return {
            "description": f"Found by the soak: {found}. README: operations and kinds the "
            "webhook does not judge pass at once, untouched.",
            "allowed": True,
        }, None
    if name == "depth-bound":
        return {
            "description": f"Found by the soak: {found}. README: a request nested more than 100 "
            "levels deep is denied with code 400 that names the bound.",
            "allowed": False,
            "code": 400,
            "message": ["levels deep"],
        }, None
    return {
        "description": f"Found by the soak: {found}. An object of the wrong shape is denied "
        f"with code 400 that names the field, never answered with a fault. {guess}",
        "allowed": False,
        "code": 400,
    }, None


def _patched_now(case: Case, review: dict[str, Any]) -> Any:
    """The object the webhook's patch gives today, or None when it gives none."""
    import jsonpatch

    from tests.fuzz.properties import Reply, judge_in_process, read_answer

    try:
        post = judge_in_process(fresh_policy_set(case.policies))
        reply: Reply = post(case.body, case.endpoint)
        patch = read_answer(reply.body, review).get("patch")
        return jsonpatch.apply_patch(review["request"]["object"], patch) if patch else None
    except Exception:
        return None


def fails_as_scenario(folder: Path) -> bool:
    """Whether `python -m webhook test` would report this scenario failing (or not loading)."""
    try:
        policy_case = load_scenario(folder, SCENARIO_ROOT, REPO_ROOT / "policies")
        policies = PolicySet.load(REPO_ROOT / policy_case.policies)
    except Exception:
        return False
    return not run_case(policy_case, policies).passed


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else type(error).__name__
    return line if len(line) <= 300 else line[:297] + "..."


if __name__ == "__main__":
    sys.exit(main())
