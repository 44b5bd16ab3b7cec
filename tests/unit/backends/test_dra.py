"""DraBackend, one table per function: what it refuses of a pod before a share is sized
(`check_pod`), the limit HAMi-core holds a claim to (`limit_mib`), the claim each share
becomes (`render`). Shares
are of an NVIDIA-H200 (143771 MiB) under examples/dra, where a quarter is 35942 MiB."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit.backends.pieces import (
    backend_of,
    changed,
    container,
    dra_sharing,
    in_view,
    of_gpu,
    of_memory,
    pod,
    sized,
    view,
)
from webhook.engine.backends.dra import DraBackend
from webhook.engine.backends.dra_claims import claim_template
from webhook.engine.backends.rendering import ClaimRendering, ContainerRendering
from webhook.engine.pod_spec import MalformedObject
from webhook.engine.share_record import NO_RECORD, ContainerShare, ShareRecord
from webhook.policy.model import Sharing

SHARE = dra_sharing("h200-share")  # gpu.nvidia.com, memory only, no hard limit
HAMI = dra_sharing("hami-dra")  # HAMi's driver: memory and cores, HAMi-core
FALLBACK = dra_sharing("h200-fallback")  # MIG, then Share, then WholeGPU
QUARTER = {"nvidia.com/gpu": "0.25"}


def backend(sharing: Sharing = SHARE, record: ShareRecord = NO_RECORD) -> DraBackend:
    found = backend_of(sharing, record=record)
    assert isinstance(found, DraBackend)
    return found


def with_step(sharing: Sharing, step: int) -> Sharing:
    assert sharing.dra is not None
    return changed(sharing, dra=replace(sharing.dra, request_step_mib=step))


def test_dra_settings_are_the_policys() -> None:
    assert backend(HAMI).dra is HAMI.dra
    assert backend(HAMI).dra.device_class_name == "hami-core-gpu.project-hami.io"


# check_pod ----------------------------------------------------------------------------------


def _ours(*claims: str) -> ShareRecord:
    """A record of shares the webhook gave through these claims, one container each."""
    return ShareRecord(
        containers={
            f"c{index}": ContainerShare("nvidia.com/gpu=0.25", "35942", claim=claim, template="t")
            for index, claim in enumerate(claims)
        }
    )


@pytest.mark.parametrize(
    ("obj", "shared", "record", "rules"),
    [
        (pod(container(limits={"nvidia.com/gpu": "1"}), nodeName="gpu-7"), (), NO_RECORD, []),
        (pod(container(limits=QUARTER)), ("infer",), NO_RECORD, []),
        (
            pod(container(limits=QUARTER), nodeName="gpu-7"),
            ("infer",),
            NO_RECORD,
            ["node-assigned"],
        ),
        (
            pod(
                container(limits=QUARTER),
                resourceClaims=[{"name": "gpu-share-infer", "resourceClaimName": "x"}],
            ),
            ("infer",),
            NO_RECORD,
            ["claim-name-taken"],
        ),
        (
            pod(
                container(limits=QUARTER),
                resourceClaims=[{"name": "gpu-share-infer", "resourceClaimTemplateName": "t"}],
            ),
            ("infer",),
            _ours("gpu-share-infer"),
            [],
        ),
        (
            pod(
                container(limits=QUARTER),
                resourceClaims=[{"name": "gpu-share-embed", "resourceClaimName": "x"}],
            ),
            ("infer",),
            NO_RECORD,
            [],
        ),
        (
            pod(container(limits=QUARTER), resourceClaims=["gpu-share-infer", {"name": 5}]),
            ("infer",),
            NO_RECORD,
            [],
        ),
        (
            pod(
                container(limits=QUARTER),
                container("embed", limits=QUARTER),
                resourceClaims=[
                    {"name": "gpu-share-infer", "resourceClaimTemplateName": "t"},
                    {"name": "gpu-share-embed", "resourceClaimName": "x"},
                ],
                nodeName="gpu-7",
            ),
            ("infer", "embed"),
            _ours("gpu-share-infer"),
            ["node-assigned", "claim-name-taken"],
        ),
    ],
    ids=[
        "whole GPUs are not claimed, whatever node they name",
        "a share in a pod without claims is given",
        "a share of a pod bound by name is never allocated",
        "a claim of the share's name the pod already has is refused",
        "a claim the record says the webhook wrote is its own",
        "a claim of another container's share name is no conflict",
        "claims of the wrong shape are left to the apiserver",
        "each problem is said, the node first, and only the claim that is not ours",
    ],
)
def test_dra_check_pod_refuses_a_named_node_and_a_claim_name_the_pod_has(
    obj: dict[str, Any], shared: tuple[str, ...], record: ShareRecord, rules: list[str]
) -> None:
    pod_view = view(obj)
    shares = [of_gpu(in_view(pod_view, name), "0.25") for name in shared]
    assert [v.rule for v in backend(SHARE, record).check_pod(pod_view, shares, [])] == rules


def test_dra_check_pod_says_the_claim_name_to_change() -> None:
    obj = pod(
        container("embed", limits=QUARTER),
        resourceClaims=[{"name": "gpu-share-embed", "resourceClaimName": "x"}],
    )
    pod_view = view(obj)
    (found,) = backend().check_pod(pod_view, [of_gpu(in_view(pod_view, "embed"), "0.25")], [])
    assert found.message == (
        'container "embed": the pod already names a resource claim "gpu-share-embed", which is '
        "the name of the claim its share is given by: rename that claim"
    )


def test_dra_check_pod_says_why_a_pod_bound_by_name_gets_no_claim() -> None:
    pod_view = view(pod(container(limits=QUARTER), nodeName="gpu-7"))
    (found,) = backend().check_pod(pod_view, [of_gpu(in_view(pod_view), "0.25")], [])
    assert (
        "Dynamic Resource Allocation gives a GPU only through its scheduler (the kubelet does "
        "not start a pod whose claim nobody allocated)"
    ) in found.message


def test_dra_check_pod_names_the_field_of_claims_that_are_no_list() -> None:
    pod_view = view(pod(container(resources={"limits": QUARTER, "claims": "gpu"})))
    with pytest.raises(MalformedObject, match=r"resources\.claims: must be a list, not a string"):
        backend().check_pod(pod_view, [of_gpu(in_view(pod_view), "0.25")], [])


# limit_mib ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sharing", "mib", "limit"),
    [
        (SHARE, 35942, None),
        (with_step(SHARE, 256), 35942, None),
        (HAMI, 35942, None),
        (with_step(HAMI, 256), 35942, 36097),
        (with_step(HAMI, 256), 35841, None),
        (with_step(HAMI, 1024), 4096, 4097),
    ],
    ids=[
        "NVIDIA's driver holds no process to its share",
        "nor where it rounds the claim up",
        "HAMi-core holds the container to the share where the claim asks it exactly",
        "HAMi-core holds it to the claim rounded up to the driver's step",
        "a share that is whole steps already is its own limit",
        "4096 MiB in steps of 1024 is held at 4097",
    ],
)
def test_dra_limit_mib_is_hami_cores_limit_where_it_is_not_the_share(
    sharing: Sharing, mib: int, limit: int | None
) -> None:
    share = sized(of_memory(in_view(view(pod())), sharing, mib), sharing)
    assert backend(sharing).limit_mib(share) == limit


# render -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sharing", "mib", "described"),
    [
        (SHARE, 35942, "claim gpu-share-infer (35942Mi of gpu.nvidia.com)"),
        (with_step(SHARE, 256), 35942, "claim gpu-share-infer (36097Mi of gpu.nvidia.com)"),
        (HAMI, 16384, "claim gpu-share-infer (16384Mi of hami-core-gpu.project-hami.io)"),
        (FALLBACK, 16384, "claim gpu-share-infer (first of MIG, 16384Mi, whole)"),
        (FALLBACK, 143627, "claim gpu-share-infer (first of 143627Mi, whole)"),
    ],
    ids=[
        "a quarter of an H200 is a claim of 35942Mi",
        "a claim rounded up to the driver's step says what it asks",
        "a claim on HAMi's driver names its class",
        "a claim of alternatives lists them in order",
        "a MIG alternative no profile holds is not named",
    ],
)
def test_dra_render_makes_each_share_a_claim_from_its_template(
    sharing: Sharing, mib: int, described: str
) -> None:
    assert sharing.dra is not None
    pod_view = view(pod())
    share = sized(of_memory(in_view(pod_view), sharing, mib), sharing)
    rendering = backend(sharing).render([share], pod_view)
    template_name, template = claim_template(share, sharing.dra)
    assert rendering.containers == {
        "infer": ContainerRendering(
            {}, described, claim=ClaimRendering("gpu-share-infer", template_name, template)
        )
    }
    assert rendering.containers["infer"].tolerated == ()
    assert (rendering.annotations, rendering.default_labels) == ({}, {})
    assert rendering.scheduler_name is None


def test_dra_render_gives_each_container_a_claim_of_its_own_name() -> None:
    long_name = "a-container-with-a-name-long-enough-to-need-a-digest-of-its-own"
    pod_view = view(pod(container(), container(long_name)))
    shares = [sized(of_gpu(where, "0.25"), SHARE) for where in pod_view.containers]
    rendering = backend().render(shares, pod_view)
    claims = {name: r.claim for name, r in rendering.containers.items()}
    assert claims["infer"] is not None and claims[long_name] is not None
    assert claims["infer"].name == "gpu-share-infer"
    assert claims[long_name].name.startswith("gpu-share-a-container-with")
    assert len(claims[long_name].name) <= 63
    # Two shares of one size are made from the one template.
    assert claims["infer"].template_name == claims[long_name].template_name
