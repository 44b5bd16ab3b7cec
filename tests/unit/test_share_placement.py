"""What a share's placement adds to a pod is the webhook's, and goes when the share does: a
workload set back to whole GPUs, or a policy that no longer asks for it, is left with nothing
of the old shape; what the user wrote stays."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from tests.support.engine_objects import deployment, mutated, pod, record_of, spec_of
from tests.support.generated_pods import DEPLOYMENT, POLICY
from webhook.engine.share_record import ShareRecord
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.model import Placement, Policy

assert POLICY.sharing is not None

POOL_TAINT = {"key": "gpu-pool", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}
POOL_LABEL = {"gpu-pool": "shared"}
VRAM_TOLERATION = {"key": "example.com/vram", "operator": "Exists", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
USERS = {"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}


def pooled(**placement: Any) -> Policy:
    """The shipped policy, its shares placed in a tainted, labelled pool."""
    assert POLICY.sharing is not None
    wanted = {"resource_tolerations": True, "tolerations": (POOL_TAINT,), **placement}
    sharing = replace(POLICY.sharing, placement=Placement(**wanted))
    return replace(POLICY, sharing=sharing)


POOLED = pooled(node_selector=POOL_LABEL)


def shared_deployment(policy: Policy = POOLED, **spec: Any) -> dict[str, Any]:
    """A Deployment asking a quarter GPU, as stored after /mutate."""
    obj = deployment(pod({"nvidia.com/gpu": "250m"}))
    spec_of(obj, DEPLOYMENT).update(copy.deepcopy(spec))
    return mutated(obj, DEPLOYMENT, policy)[1]


def set_gpu(obj: dict[str, Any], amount: str) -> dict[str, Any]:
    """`obj` with its container's nvidia.com/gpu set, its other limits left as kubectl apply
    leaves what it did not write."""
    changed = copy.deepcopy(obj)
    spec_of(changed, DEPLOYMENT)["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = amount
    return changed


def test_the_record_lists_the_policys_own_tolerations_and_node_selector_entries() -> None:
    stored = shared_deployment()
    spec = spec_of(stored, DEPLOYMENT)
    assert spec["tolerations"] == [VRAM_TOLERATION, POOL_TAINT]
    assert spec["nodeSelector"]["gpu-pool"] == "shared"
    record = record_of(stored, DEPLOYMENT)
    # The VRAM toleration is recognised as the webhook's; only the policy's own are listed.
    assert record["tolerations"] == [POOL_TAINT]
    assert record["nodeSelector"] == POOL_LABEL


def test_what_the_user_wrote_already_is_not_recorded_as_the_webhooks() -> None:
    stored = shared_deployment(tolerations=[POOL_TAINT], nodeSelector=POOL_LABEL)
    record = record_of(stored, DEPLOYMENT)
    assert "tolerations" not in record and "nodeSelector" not in record
    whole = mutated(set_gpu(stored, "1"), DEPLOYMENT, POOLED)[1]
    spec = spec_of(whole, DEPLOYMENT)
    assert POOL_TAINT in spec["tolerations"] and spec["nodeSelector"] == POOL_LABEL


def test_a_share_set_back_to_a_whole_gpu_loses_its_placement_and_keeps_the_users() -> None:
    stored = shared_deployment(tolerations=[USERS], nodeSelector={"zone": "a"})
    whole = mutated(set_gpu(stored, "1"), DEPLOYMENT, POOLED)[1]
    spec = spec_of(whole, DEPLOYMENT)
    assert spec["tolerations"] == [USERS, GPU_TOLERATION]
    assert spec["nodeSelector"] == {"zone": "a"}
    container = spec["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert container.get("env") == []
    assert SHARES_ANNOTATION not in spec_of_metadata(whole)


def spec_of_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    annotations: dict[str, Any] = obj["spec"]["template"]["metadata"].get("annotations", {})
    return annotations


def test_a_toleration_the_whole_gpu_placement_wants_too_stays() -> None:
    # This policy's whole GPUs go to the same pool: its taint is still wanted.
    both = replace(
        POOLED, whole_gpu=Placement(resource_tolerations=True, tolerations=(POOL_TAINT,))
    )
    whole = mutated(set_gpu(shared_deployment(both), "1"), DEPLOYMENT, both)[1]
    assert spec_of(whole, DEPLOYMENT)["tolerations"] == [POOL_TAINT, GPU_TOLERATION]


def test_a_policy_that_stops_asking_for_a_toleration_takes_it_back() -> None:
    stored = shared_deployment()
    unpooled = pooled(tolerations=(), node_selector={})
    again = mutated(stored, DEPLOYMENT, unpooled)[1]
    spec = spec_of(again, DEPLOYMENT)
    assert spec["tolerations"] == [VRAM_TOLERATION]
    assert spec.get("nodeSelector", {}).get("gpu-pool") is None
    record = record_of(again, DEPLOYMENT)
    assert "tolerations" not in record and "nodeSelector" not in record


def test_a_value_the_user_changed_since_is_theirs() -> None:
    stored = shared_deployment()
    spec_of(stored, DEPLOYMENT)["nodeSelector"]["gpu-pool"] = "a100"
    whole = mutated(set_gpu(stored, "1"), DEPLOYMENT, pooled())[1]
    assert spec_of(whole, DEPLOYMENT)["nodeSelector"]["gpu-pool"] == "a100"


@pytest.mark.parametrize(
    "text",
    [
        '{"model":null,"pinned":false,"containers":{},"tolerations":"no"}',
        '{"model":null,"pinned":false,"containers":{},"nodeSelector":{"a":1}}',
    ],
)
def test_a_record_with_placement_of_the_wrong_shape_counts_as_none(text: str) -> None:
    assert ShareRecord.read({SHARES_ANNOTATION: text}) == ShareRecord()


def test_the_record_round_trips_its_placement() -> None:
    record = ShareRecord("Tesla-T4", True, {}, None, (POOL_TAINT,), POOL_LABEL)
    assert ShareRecord.read({SHARES_ANNOTATION: record.encode()}) == record
