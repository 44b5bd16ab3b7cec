"""Failures the fuzzing found, kept: the cases `python -m tests.fuzz.soak` wrote to
tests/fuzz/regressions/ (each replayed with the case that must be judged before it, by the
same policies loaded afresh), and the same bugs written out by hand, smallest first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fuzz.properties import check_case, fresh_policy_set
from tests.fuzz.soak import REGRESSIONS, case_from_record
from tests.fuzz.strategies import Case
from webhook.engine.pod_spec import MAX_ANNOTATION_BYTES

# The folder itself stands in when it holds no case yet (an empty parameter list would be a
# skipped test).
FOUND = sorted(REGRESSIONS.glob("*.json")) or [REGRESSIONS]


@pytest.mark.parametrize("path", FOUND, ids=[path.stem for path in FOUND])
def test_found_by_the_soak(path: Path) -> None:
    if path == REGRESSIONS:
        return
    record = json.loads(path.read_text())
    case = case_from_record(record["case"])
    policies = fresh_policy_set(case.policies)
    for before in record["before"]:
        check_case(case_from_record(before), policies)
    check_case(case, policies)


def pod_review(uid: str, obj: Any, kind: str = "Pod", group: str = "") -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": "v1", "kind": kind},
            "operation": "CREATE",
            "namespace": "ml",
            "object": obj,
        },
    }
    return json.dumps(review).encode()


QUARTER = {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "250m"}}}]}


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ({"metadata": None, "spec": QUARTER}, {"spec": QUARTER}),
        (
            {"spec": {"template": {"metadata": None, "spec": QUARTER}}},
            {"spec": {"template": {"spec": QUARTER}}},
        ),
    ],
    ids=["pod", "deployment"],
)
def test_a_pod_without_metadata_after_one_with_null_metadata(first: Any, then: Any) -> None:
    """The outcome cache reads an absent metadata and a null one alike, but the patch that
    writes the annotations differs: `replace` where metadata is null, `add` where it is absent.
    The second pod gets the first one's patch, which does not apply to it."""
    kind, group = ("Pod", "") if "metadata" in first else ("Deployment", "apps")
    policies = fresh_policy_set("shipped")
    check_case(Case("found", pod_review("first", first, kind, group)), policies)
    check_case(Case("found", pod_review("then", then, kind, group)), policies)


def test_a_patch_never_takes_the_annotations_past_the_apiservers_limit() -> None:
    """A pod whose annotations are just under the apiserver's limit (256 KiB, keys and values)
    and asks for a share: the policy and shares annotations would take them past the limit.
    Found patched into a pod the apiserver refuses (and the webhook's second pass denied);
    such a pod is to be denied at once (tests/scenarios/fuzz-found has it too)."""
    note = "x" * (MAX_ANNOTATION_BYTES - len("note") - 100)
    pod = {"metadata": {"annotations": {"note": note}}, "spec": QUARTER}
    check_case(Case("found", pod_review("near-the-limit", pod)), fresh_policy_set("shipped"))
