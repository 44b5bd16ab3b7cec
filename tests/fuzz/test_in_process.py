"""The fuzz properties (properties.py) over generated bodies, judged in this process by the
same decoding, judgement and encoding the server's route uses. Each family of bodies has its
own test, so a failure says which; `python -m tests.fuzz.soak` runs them all, far longer."""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given

from tests.fuzz.profiles import ci
from tests.fuzz.properties import check_case
from tests.fuzz.strategies import Case, family_cases, nested
from webhook.admission.input_bounds import MAX_NESTING_DEPTH
from webhook.engine.pod_spec import MAX_CONTAINERS
from webhook.server.settings import MAX_BODY_BYTES


def judged(case: Case) -> None:
    event(case.family)
    event(check_case(case))


@ci(250)
@given(family_cases("bytes", "json"))
def test_a_body_that_is_no_review_gets_a_400(case: Case) -> None:
    judged(case)


@ci(250)
@given(family_cases("envelope"))
def test_an_envelope_of_any_shape_gets_a_400_or_an_answer(case: Case) -> None:
    judged(case)


@ci(250)
@given(family_cases("request"))
def test_a_request_of_any_shape_gets_a_well_formed_answer(case: Case) -> None:
    judged(case)


@ci(300)
@given(family_cases("workload"))
def test_pods_and_workloads_get_patches_that_apply_and_obey_the_apiserver(case: Case) -> None:
    judged(case)


@ci(250)
@given(family_cases("sibling"))
def test_a_review_judged_after_its_sibling_gets_the_same_care(case: Case) -> None:
    judged(case)


@ci(4)
@given(family_cases("huge"))
def test_bodies_around_the_size_limit(case: Case) -> None:
    judged(case)


# --- the bounds, each side, whatever the generator drew --------------------------------------

UID = "fuzz-bounds"


def pod_review(obj: object) -> bytes:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "ml",
            "object": obj,
        },
    }
    return json.dumps(review).encode()


def gpu_pod(containers: int = 1, **extra: object) -> dict[str, object]:
    """A pod whose first container asks for a quarter of a GPU (the shares of one pod must fit
    the one card they share), the others for none."""
    return {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": f"c{i}", "resources": {"limits": {"nvidia.com/gpu": "250m"}}}
                if i == 0
                else {"name": f"c{i}"}
                for i in range(containers)
            ],
            **extra,
        },
    }


@pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH - 1, MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1])
def test_nesting_on_each_side_of_the_bound(depth: int) -> None:
    # The request is level 1, its object 2, the spec 3: the value below adds the rest.
    body = pod_review(gpu_pod(extra=nested(depth - 3)))
    assert check_case(Case("bounds", body)) == (
        "200 denied 400" if depth > MAX_NESTING_DEPTH else "200 patched"
    )


@pytest.mark.parametrize("containers", [MAX_CONTAINERS, MAX_CONTAINERS + 1])
def test_containers_on_each_side_of_the_bound(containers: int) -> None:
    body = pod_review(gpu_pod(containers))
    expected = "200 patched" if containers <= MAX_CONTAINERS else "200 denied 400"
    assert check_case(Case("bounds", body)) == expected


@pytest.mark.parametrize("extra", [0, 1])
def test_bodies_on_each_side_of_the_size_limit(extra: int) -> None:
    base = len(pod_review(gpu_pod(extra={"note": ""})))
    body = pod_review(gpu_pod(extra={"note": "x" * (MAX_BODY_BYTES - base + extra)}))
    assert len(body) == MAX_BODY_BYTES + extra
    assert check_case(Case("bounds", body)) == ("413" if extra else "200 patched")
