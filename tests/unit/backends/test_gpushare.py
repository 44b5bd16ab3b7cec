"""GpushareBackend: `render` writes `aliyun.com/gpu-mem` in the policy's unit (GiB unless the
device plugin counts MiB), and `check` refuses shares in two containers of a pod and a pod
that another scheduler than the default one (whose extender gpushare is) would place."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.backends.pieces import (
    A100,
    H200,
    T4,
    backend_of,
    changed,
    container,
    example_sharing,
    in_view,
    of_gpu,
    of_memory,
    pod,
    sized,
    view,
)
from webhook.engine.backends.rendering import ContainerRendering
from webhook.engine.share_record import ShareRecord
from webhook.policy.model import Sharing

SHARING = example_sharing("gpushare")  # unit GiB, as the device plugin counts by default
IN_MIB = changed(SHARING, unit="MiB")


@pytest.mark.parametrize(
    ("sharing", "share", "product", "amount", "text"),
    [
        (SHARING, ("gpu", "0.25"), A100, "10", "aliyun.com/gpu-mem=10 GiB"),
        (SHARING, ("gpu", "0.25"), T4, "3", "aliyun.com/gpu-mem=3 GiB"),
        (SHARING, ("gpu", "0.1"), H200, "14", "aliyun.com/gpu-mem=14 GiB"),
        (SHARING, ("memory", 6144), A100, "6", "aliyun.com/gpu-mem=6 GiB"),
        (IN_MIB, ("gpu", "0.25"), T4, "3840", "aliyun.com/gpu-mem=3840 MiB"),
        (IN_MIB, ("memory", 6000), A100, "6000", "aliyun.com/gpu-mem=6000 MiB"),
    ],
    ids=[
        "a quarter of an A100 40GB is 10 GiB",
        "a quarter of a T4, 3.75 GiB, is 3",
        "a tenth of an H200, 14377 MiB, is 14 GiB",
        "6Gi of memory is 6 GiB",
        "where the device plugin counts MiB a quarter of a T4 is 3840",
        "where the device plugin counts MiB 6000 MiB stays 6000",
    ],
)
def test_gpushare_render_writes_gpu_mem_in_the_device_plugins_unit(
    sharing: Sharing, share: tuple[str, Any], product: str, amount: str, text: str
) -> None:
    pod_view = view(pod())
    where = in_view(pod_view)
    form, value = share
    intent = of_gpu(where, value) if form == "gpu" else of_memory(where, sharing, value)
    rendering = backend_of(sharing).render([sized(intent, sharing, product)], pod_view)
    assert rendering.containers == {
        "infer": ContainerRendering({"aliyun.com/gpu-mem": amount}, text)
    }
    assert rendering.scheduler_name is None
    assert (rendering.annotations, rendering.default_labels) == ({}, {})


def _check(obj: dict[str, Any], record: ShareRecord) -> list[str]:
    pod_view = view(obj)
    shares = [
        sized(of_gpu(where, "0.25"), SHARING)
        for where in pod_view.containers
        if "resources" in where.raw
    ]
    backend = backend_of(SHARING, record=record, policy_name="team-gpus")
    return [violation.rule for violation in backend.check(shares, pod_view)]


QUARTER = {"nvidia.com/gpu": "0.25"}


@pytest.mark.parametrize(
    ("obj", "record", "rules"),
    [
        (pod(container(limits=QUARTER)), ShareRecord(), []),
        (pod(container(limits=QUARTER), schedulerName="default-scheduler"), ShareRecord(), []),
        (
            pod(container(limits=QUARTER), container("side", limits=QUARTER)),
            ShareRecord(),
            ["one-share-per-pod"],
        ),
        (
            pod(container(limits=QUARTER), schedulerName="volcano"),
            ShareRecord(),
            ["scheduler-conflict"],
        ),
        (
            pod(container(limits=QUARTER), schedulerName="volcano"),
            ShareRecord(scheduler_name="volcano"),
            [],
        ),
        (
            pod(
                container(limits=QUARTER),
                container("side", limits=QUARTER),
                schedulerName="volcano",
            ),
            ShareRecord(),
            ["one-share-per-pod", "scheduler-conflict"],
        ),
    ],
    ids=[
        "one share under the default scheduler is given",
        "the default scheduler named outright is given",
        "shares in two containers are refused: the device plugin serves one",
        "a pod another scheduler places never reaches the extender",
        "a scheduler the webhook set for an earlier policy may be replaced",
        "both at once are both said, the containers first",
    ],
)
def test_gpushare_check_refuses_two_containers_and_another_scheduler(
    obj: dict[str, Any], record: ShareRecord, rules: list[str]
) -> None:
    assert _check(obj, record) == rules


def test_gpushare_check_names_the_policy_and_the_extender_in_a_scheduler_conflict() -> None:
    pod_view = view(pod(schedulerName="volcano"))
    share = sized(of_gpu(in_view(pod_view), "0.25"), SHARING)
    (found,) = backend_of(SHARING, policy_name="team-gpus").check([share], pod_view)
    assert found.message == (
        'schedulerName "volcano" cannot give a share of a GPU: policy "team-gpus" (gpushare\'s '
        'scheduler extender) gives it through "default-scheduler"; remove schedulerName from '
        'the pod, or write "default-scheduler"'
    )


def test_gpushare_check_says_why_one_container_only() -> None:
    pod_view = view(pod(container("a"), container("b")))
    shares = [sized(of_gpu(in_view(pod_view, name), "0.25"), SHARING) for name in ("a", "b")]
    (found,) = backend_of(SHARING).check(shares, pod_view)
    assert "gpushare gives a share to one container of a pod" in found.message
    assert "(its device plugin serves one container a pod)" in found.message
