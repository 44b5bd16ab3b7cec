"""Bounds on what a client controls: nesting, annotation and container counts, and the bytes the
outcome cache holds. Each bound answers a well-formed denial (or forgets), never a fault."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.generated_pods import POD, POLICY
from webhook.admission.answer import judge
from webhook.admission.input_bounds import MAX_NESTING_DEPTH, nested_too_deeply
from webhook.admission.review import decode_envelope
from webhook.bounded_cache import BoundedMemo
from webhook.engine.outcome_cache import OutcomeCache
from webhook.engine.pod_spec import (
    MAX_ANNOTATION_BYTES,
    MAX_CONTAINERS,
    MalformedObject,
    PodView,
    pod_parts,
)
from webhook.engine.share_record import MAX_RECORD_CHARS, ShareRecord
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.namespace_labels import NoCluster
from webhook.policy.policy_set import PolicySet

REPO_ROOT = Path(__file__).resolve().parents[2]
REVIEW = (
    REPO_ROOT / "tests" / "scenarios" / "shipped" / "01-create-pod-frac-quarter" / "review.json"
)
POLICIES = PolicySet.load(REPO_ROOT / "policies")


def nested(depth: int) -> Any:
    """A string inside `depth` arrays."""
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def answer(review: dict[str, Any]) -> Any:
    envelope = decode_envelope(json.dumps(review).encode())
    return judge(envelope, POLICIES, "mutate", NoCluster(), lambda _, error: repr(error)).verdict


def review_with(change: Any) -> dict[str, Any]:
    review = json.loads(REVIEW.read_bytes())
    change(review["request"]["object"])
    return review


@pytest.mark.parametrize(
    ("depth", "deep"), [(3, False), (MAX_NESTING_DEPTH, False), (MAX_NESTING_DEPTH + 1, True)]
)
def test_nesting_is_measured_exactly(depth: int, deep: bool) -> None:
    value = nested(depth)
    assert nested_too_deeply(json.dumps(value).encode(), value) is deep


def test_few_brackets_need_no_walk() -> None:
    # A body with no more openers than the limit is not walked: a value that is no JSON at all
    # would fail the walk, and is never looked at.
    assert nested_too_deeply(b"[[[1]]]", object()) is False


@pytest.mark.parametrize(
    "place",
    [
        lambda obj, value: obj["spec"]["containers"][0].__setitem__("args", value),
        lambda obj, value: obj["spec"].__setitem__("affinity", {"nodeAffinity": value}),
        lambda obj, value: obj["metadata"].__setitem__("labels", {"a": value}),
    ],
    ids=["args", "affinity", "labels"],
)
def test_a_request_nested_too_deeply_is_denied_in_band(place: Any) -> None:
    verdict = answer(review_with(lambda obj: place(obj, nested(500))))
    assert (verdict.allowed, verdict.code) == (False, 400)
    assert f"more than {MAX_NESTING_DEPTH} levels deep" in verdict.message


def test_a_shares_record_that_cannot_be_read_counts_as_none() -> None:
    deep = '{"containers":' + "[" * 5000 + "]" * 5000 + "}"
    assert ShareRecord.read({SHARES_ANNOTATION: deep}) == ShareRecord()
    asked_deep = json.dumps({"containers": {"a": {"asked": nested(90), "vram": "1"}}})
    assert isinstance(ShareRecord.read({SHARES_ANNOTATION: asked_deep}), ShareRecord)
    huge = json.dumps({"model": "x" * MAX_RECORD_CHARS, "containers": {}})
    assert ShareRecord.read({SHARES_ANNOTATION: huge}) == ShareRecord()
    verdict = answer(
        review_with(
            lambda obj: (
                obj["metadata"].setdefault("annotations", {}).update({SHARES_ANNOTATION: deep})
            )
        )
    )
    assert verdict.allowed and verdict.patch, verdict


def test_annotations_over_the_apiservers_limit_are_refused() -> None:
    pod = copy.deepcopy(POD_OBJECT)
    pod["metadata"]["annotations"] = {"a": "x" * (MAX_ANNOTATION_BYTES - 1)}
    pod_parts(pod, POD)
    pod["metadata"]["annotations"]["é"] = "é"  # four bytes more, in two characters
    with pytest.raises(MalformedObject) as refused:
        pod_parts(pod, POD)
    assert str(refused.value) == (
        f"metadata.annotations: Too long: must have at most {MAX_ANNOTATION_BYTES} bytes"
    )


def test_a_lone_surrogate_counts_the_three_bytes_it_is_written_in() -> None:
    # Found by the fuzz soak: JSON's escape \ud800 decodes to a string UTF-8 cannot encode.
    pod = copy.deepcopy(POD_OBJECT)
    pod["metadata"]["annotations"] = {"a": "x" * (MAX_ANNOTATION_BYTES - 4), "\ud800": ""}
    pod_parts(pod, POD)
    pod["metadata"]["annotations"]["\udfff"] = ""
    with pytest.raises(MalformedObject, match="Too long"):
        pod_parts(pod, POD)


def test_containers_beyond_the_bound_are_refused_before_they_are_read() -> None:
    pod = copy.deepcopy(POD_OBJECT)
    template = pod["spec"]["containers"][0]
    pod["spec"]["initContainers"] = [dict(template, name=f"init-{i}") for i in range(10)]
    pod["spec"]["containers"] = [dict(template, name=f"c-{i}") for i in range(MAX_CONTAINERS - 10)]
    assert len(PodView.read(pod, POD).containers) == MAX_CONTAINERS
    pod["spec"]["containers"].append(dict(template, name="one-more"))
    with pytest.raises(MalformedObject, match=f"at most {MAX_CONTAINERS} are admitted"):
        PodView.read(pod, POD)


def test_two_containers_of_one_name_are_refused_naming_both() -> None:
    pod = copy.deepcopy(POD_OBJECT)
    first = pod["spec"]["containers"][0]
    pod["spec"]["initContainers"] = [dict(first, name="setup"), dict(first)]
    with pytest.raises(MalformedObject) as refused:
        PodView.read(pod, POD)
    assert str(refused.value) == (
        f'spec.containers[0].name: Duplicate value: "{first["name"]}" (also '
        "spec.initContainers[1]): give each container and init container a name of its own"
    )


# --- the cache's bytes ---------------------------------------------------------------------


def test_a_memo_with_a_budget_keeps_its_weight_within_it() -> None:
    memo: BoundedMemo[int, str] = BoundedMemo(100, max_bytes=1000)
    for key in range(50):
        memo.put(key, "v", weight=100)
        assert memo.weight <= 1000
    assert len(memo) == 10
    assert [key for key in range(50) if memo.get(key)] == list(range(40, 50))
    memo.put(49, "again", weight=50)  # an entry put again weighs once
    assert memo.weight == 950
    memo.put(-1, "heavy", weight=126)  # over an eighth of the budget: not kept
    assert memo.get(-1) is None and memo.weight == 950


def test_distinct_large_pods_stay_within_the_outcome_caches_budget() -> None:
    budget = 2 * 1024 * 1024
    cache = OutcomeCache(max_bytes=budget)
    for index in range(200):
        pod = copy.deepcopy(POD_OBJECT)
        pod["metadata"]["annotations"] = {"note": f"{index}" * 20000}  # about 20 to 60 KB
        cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")
        assert cache.weight <= budget
    assert 0 < len(cache) < 200
    assert cache.weight > budget // 2


POD_OBJECT: dict[str, Any] = json.loads(REVIEW.read_bytes())["request"]["object"]


def test_a_share_that_would_push_annotations_past_the_limit_is_refused_before_the_patch() -> None:
    # Found by the fuzz suite: the webhook's own annotations took a pod over the limit, and its
    # second pass refused what its first had patched.
    room = 100
    verdict = answer(
        review_with(
            lambda obj: (
                obj["metadata"]
                .setdefault("annotations", {})
                .update({"filler": "x" * (MAX_ANNOTATION_BYTES - room - len("filler"))})
            )
        )
    )
    assert (verdict.allowed, verdict.code) == (False, 400)
    assert "metadata.annotations: Too long: must have at most 262144 bytes" in verdict.message
    assert not verdict.patch
