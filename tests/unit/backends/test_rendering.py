"""rendering.py's helpers, one table each: the checks several backends share
(`scheduler_conflict`, `node_assigned`, `one_container`), what a `ContainerRendering` says,
and the defaults of `ShareBackend` that a backend keeps where it overrides none."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit.backends.pieces import (
    A100,
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
from webhook.engine.backends.rendering import (
    DEFAULT_SCHEDULER,
    ContainerRendering,
    Rendering,
    ShareBackend,
    node_assigned,
    one_container,
    scheduler_conflict,
)
from webhook.engine.findings import WholeGpu
from webhook.engine.share_record import ShareRecord
from webhook.policy.model import HardLimit, Sharing

# scheduler_conflict -------------------------------------------------------------------------

CONFLICT_MESSAGE = (
    'schedulerName "volcano" cannot give a share of a GPU: policy "p" gives it through '
    '"kai-scheduler"; remove schedulerName from the pod, or write "kai-scheduler"'
)


@pytest.mark.parametrize(
    ("spec", "record", "rules"),
    [
        ({}, ShareRecord(), []),
        ({"schedulerName": DEFAULT_SCHEDULER}, ShareRecord(), []),
        ({"schedulerName": "kai-scheduler"}, ShareRecord(), []),
        ({"schedulerName": "volcano"}, ShareRecord(scheduler_name="volcano"), []),
        ({"schedulerName": "volcano"}, ShareRecord(), ["scheduler-conflict"]),
        (
            {"schedulerName": "volcano"},
            ShareRecord(scheduler_name="yunikorn"),
            ["scheduler-conflict"],
        ),
    ],
    ids=[
        "a pod that names no scheduler may be given the wanted one",
        "the default scheduler may be replaced",
        "the wanted scheduler itself is no conflict",
        "a scheduler the webhook set for an earlier policy may be replaced",
        "another scheduler the pod names is a conflict",
        "a scheduler other than the one the record says the webhook set is a conflict",
    ],
)
def test_scheduler_conflict_lets_only_another_scheduler_the_pod_named_conflict(
    spec: dict[str, Any], record: ShareRecord, rules: list[str]
) -> None:
    found = scheduler_conflict(view(pod(**spec)), "kai-scheduler", 'policy "p"', record)
    assert [violation.rule for violation in found] == rules


def test_scheduler_conflict_names_both_schedulers_and_the_two_ways_out() -> None:
    (found,) = scheduler_conflict(view(pod(schedulerName="volcano")), "kai-scheduler", 'policy "p"')
    assert found.message == CONFLICT_MESSAGE


# node_assigned ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "rules"),
    [
        ({}, []),
        ({"nodeName": ""}, []),
        ({"nodeName": "gpu-7"}, ["node-assigned"]),
    ],
    ids=[
        "a pod without nodeName is placed by a scheduler",
        "an empty nodeName binds the pod to no node",
        "a pod that names its node is refused",
    ],
)
def test_node_assigned_refuses_only_a_pod_that_names_its_node(
    spec: dict[str, Any], rules: list[str]
) -> None:
    found = node_assigned(view(pod(**spec)), "HAMi", "its webhook denies it")
    assert [violation.rule for violation in found] == rules


def test_node_assigned_says_the_node_the_backend_and_the_consequence() -> None:
    (found,) = node_assigned(view(pod(nodeName="gpu-7")), "KAI Scheduler", "it holds no share")
    assert found.message == (
        'spec.nodeName "gpu-7" binds the pod to a node past every scheduler, and KAI Scheduler '
        "gives a GPU only through its scheduler (it holds no share): remove nodeName, and choose "
        "the node with a nodeSelector on its kubernetes.io/hostname label"
    )


# one_container ------------------------------------------------------------------------------


def _shares_in(*names: str) -> list[Any]:
    sharing = example_sharing("gpushare")
    pod_view = view(pod(*(container(name) for name in names)))
    return [sized(of_gpu(in_view(pod_view, name), "0.25"), sharing) for name in names]


@pytest.mark.parametrize(
    ("names", "rules"),
    [((), []), (("infer",), []), (("infer", "sidecar"), ["one-share-per-pod"])],
    ids=[
        "no share is no conflict",
        "one container with a share is what the backend gives",
        "two containers with a share are refused",
    ],
)
def test_one_container_refuses_a_pod_with_shares_in_two_containers(
    names: tuple[str, ...], rules: list[str]
) -> None:
    assert [v.rule for v in one_container(_shares_in(*names), "gpushare", "why")] == rules


def test_one_container_names_every_container_with_a_share_and_the_reason() -> None:
    (found,) = one_container(_shares_in("a", "b", "c"), "KAI Scheduler", "one annotation a pod")
    assert found.message == (
        'container "a", container "b", container "c" each ask for a share of a GPU, and KAI '
        "Scheduler gives a share to one container of a pod (one annotation a pod): split them "
        "into pods, or ask in one container"
    )


# ContainerRendering -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rendering", "text", "tolerated"),
    [
        (
            ContainerRendering({"example.com/vram": "4096"}),
            "example.com/vram=4096",
            ("example.com/vram",),
        ),
        (
            ContainerRendering({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}),
            "nvidia.com/gpu=1, nvidia.com/gpumem=3000",
            ("nvidia.com/gpu", "nvidia.com/gpumem"),
        ),
        (
            ContainerRendering(
                {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"},
                "3000 MiB on one card",
                node_resources=("nvidia.com/gpu",),
            ),
            "3000 MiB on one card",
            ("nvidia.com/gpu",),
        ),
        (ContainerRendering({}, "gpu-fraction=0.25"), "gpu-fraction=0.25", ()),
        (ContainerRendering({}), "", ()),
    ],
    ids=[
        "one resource reads as it is written and is tolerated",
        "several resources read in their order and are all tolerated",
        "a description and the node resources given replace both",
        "an annotation share has a description and no resource to tolerate",
        "nothing at all reads as nothing",
    ],
)
def test_container_rendering_text_and_tolerated_default_to_its_resources(
    rendering: ContainerRendering, text: str, tolerated: tuple[str, ...]
) -> None:
    assert rendering.text == text
    assert rendering.tolerated == tolerated


def test_a_rendering_carries_no_annotation_label_or_scheduler_unless_given() -> None:
    rendering = Rendering({})
    assert (rendering.annotations, rendering.default_labels) == ({}, {})
    assert rendering.scheduler_name is None


# ShareBackend's defaults --------------------------------------------------------------------


def _base(backend: str = "time-slicing", **sharing: Any) -> ShareBackend:
    return ShareBackend(changed(example_sharing(backend), **sharing), "pool")


def test_share_backend_read_native_and_read_pod_read_no_dialect_of_their_own() -> None:
    limits = {"example.com/vram": "4096", "nvidia.com/gpu": "1"}
    pod_view = view(pod(container(limits=limits), annotations={"gpu-fraction": "0.5"}))
    assert _base().read_native(in_view(pod_view)) is None
    assert _base().read_pod(pod_view) == []


def test_share_backend_per_card_shares_leaves_shares_and_whole_gpus_as_read() -> None:
    pod_view = view(pod(container(limits={"nvidia.com/gpu": "2", "example.com/vram": "4Gi"})))
    where = in_view(pod_view)
    shares = [of_memory(where, example_sharing("time-slicing"), 4096)]
    whole = [WholeGpu(where, "nvidia.com/gpu", 2)]
    assert _base().per_card_shares(shares, whole) == (shares, whole)


def test_share_backend_check_pod_and_check_refuse_nothing() -> None:
    pod_view = view(pod(container(limits={"nvidia.com/gpu": "0.25"}), nodeName="gpu-7"))
    intent = of_gpu(in_view(pod_view), "0.25")
    backend = _base()
    assert backend.check_pod(pod_view, [intent], []) == []
    assert backend.check([sized(intent, backend.sharing)], pod_view) == []


def test_share_backend_granted_is_the_share_as_sized_and_limit_mib_is_none() -> None:
    pod_view = view(pod())
    backend = _base()
    share = sized(of_gpu(in_view(pod_view), "0.25"), backend.sharing)
    assert backend.granted(share) is share
    assert backend.limit_mib(share) is None


def test_share_backend_render_is_left_to_each_backend() -> None:
    with pytest.raises(NotImplementedError):
        _base().render([], view(pod()))


def _reserved(backend: str, product: str, mib: int) -> Sharing:
    sharing = example_sharing(backend)
    models = {**sharing.models, product: replace(sharing.models[product], reserved_mib=mib)}
    return changed(sharing, models=models)


@pytest.mark.parametrize(
    ("sharing", "hard_limit", "product", "written", "seen"),
    [
        (example_sharing("time-slicing"), HardLimit.NONE, A100, "0.25", 40960),
        (example_sharing("time-slicing"), HardLimit.NONE, T4, "0.25", 15360),
        (_reserved("time-slicing", T4, 448), HardLimit.NONE, T4, "0.25", 15360),
        (example_sharing("time-slicing"), HardLimit.MPS, A100, "0.25", 40960),
        (example_sharing("time-slicing"), HardLimit.HAMI_CORE, A100, "0.25", 10240),
        (example_sharing("time-slicing"), HardLimit.HAMI_CORE, T4, "0.5", 7680),
    ],
    ids=[
        "without a hard limit a process sees the whole card",
        "the whole card is the share's model's",
        "the card's memory the driver keeps is still reported as the card's",
        "under MPS the device still reports the whole card",
        "under HAMi-core a process sees its limit, the share, as the card",
        "under HAMi-core half a T4 is seen as 7680 MiB",
    ],
)
def test_share_backend_seen_mib_is_the_card_or_hami_cores_limit(
    sharing: Sharing, hard_limit: HardLimit, product: str, written: str, seen: int
) -> None:
    backend = ShareBackend(changed(sharing, hard_limit=hard_limit), "pool")
    share = sized(of_gpu(in_view(view(pod())), written), backend.sharing, product)
    assert backend.seen_mib(share) == seen


def test_share_backend_seen_mib_under_hami_core_is_the_backends_own_limit() -> None:
    # KAI keeps seen_mib as ShareBackend has it, and its isolator caps 0.125 of an A100 40GB
    # at 0.12 of the card's 40960 MiB: 4915, not the 5120 sized.
    sharing = changed(example_sharing("kai"), hard_limit=HardLimit.HAMI_CORE)
    kai = backend_of(sharing)
    assert type(kai).seen_mib is ShareBackend.seen_mib
    share = sized(of_gpu(in_view(view(pod())), "0.125"), sharing)
    assert (share.mib, kai.seen_mib(share)) == (5120, 4915)


@pytest.mark.parametrize("name", ["extended-resource", "gpushare", "time-slicing"])
def test_backends_that_enforce_a_share_as_sized_keep_every_default_but_check_and_render(
    name: str,
) -> None:
    backend = backend_of(example_sharing(name))
    overridden = {
        method
        for method in vars(ShareBackend)
        if not method.startswith("_")
        and getattr(type(backend), method) is not vars(ShareBackend)[method]
    }
    assert overridden <= {"check", "render"}
    share = sized(of_gpu(in_view(view(pod())), "0.25"), backend.sharing)
    assert backend.granted(share) is share
    assert backend.limit_mib(share) is None
    assert backend.seen_mib(share) == 40960
