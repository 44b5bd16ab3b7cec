"""KaiBackend, one table per function: what KAI Scheduler refuses or would not give
(`check_pod`, `check`), what it holds and caps (`granted`, `limit_mib`, and `seen_mib` under
its HAMi-core isolator), and the annotations, queue and scheduler it is given (`render`).
The sharing is examples/policies/kai (MiB, queue default-queue, kai-scheduler)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.backends.pieces import (
    A100,
    H100,
    H200,
    T4,
    backend_of,
    changed,
    container,
    deployment,
    example_sharing,
    in_view,
    of_annotation,
    of_gpu,
    of_memory,
    pod,
    sized,
    view,
)
from webhook.engine.backends.rendering import ContainerRendering, ShareBackend
from webhook.engine.pod_spec import PodView
from webhook.engine.share_record import NO_RECORD, ShareRecord
from webhook.policy.model import HardLimit, KaiSettings, Sharing

SHARING = example_sharing("kai")
CAPPED = changed(SHARING, hard_limit=HardLimit.HAMI_CORE)
IN_GIB = changed(SHARING, unit="GiB")
QUEUE = "kai.scheduler/queue"


def backend(sharing: Sharing = SHARING, record: ShareRecord = NO_RECORD) -> ShareBackend:
    return backend_of(sharing, record=record, policy_name="kai")


def share_of(
    form: str,
    value: Any,
    sharing: Sharing = SHARING,
    product: str = A100,
    pod_view: PodView | None = None,
) -> Any:
    """A share of the container "infer" of `pod_view` (a plain pod's where none is given):
    ("gpu", "0.25"), ("memory", 4096) or ("annotation", "0.125") for gpu-fraction as a user
    wrote it."""
    where = in_view(pod_view or view(pod()))
    if form == "gpu":
        intent = of_gpu(where, value)
    elif form == "memory":
        intent = of_memory(where, sharing, value)
    else:
        intent = of_annotation(where, "gpu-fraction", value)
    return sized(intent, sharing, product)


# check_pod ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "spec", "has_share", "rules"),
    [
        ({}, {"nodeName": "gpu-7"}, False, []),
        ({"gpu-fraction-num-devices": "2"}, {}, False, []),
        ({}, {}, True, []),
        ({}, {"nodeName": "gpu-7"}, True, ["node-assigned"]),
        ({"gpu-fraction-num-devices": "1"}, {}, True, []),
        ({"gpu-fraction-num-devices": "2"}, {}, True, ["fraction-devices"]),
        (
            {"gpu-fraction-num-devices": "4"},
            {"nodeName": "gpu-7"},
            True,
            ["node-assigned", "fraction-devices"],
        ),
    ],
    ids=[
        "whole GPUs are not sent to KAI, whatever node they name",
        "whole GPUs are not sent to KAI, whatever devices they name",
        "a share KAI schedules is given",
        "a share that names its node is never placed by KAI",
        "a share on one device is what the webhook sizes",
        "a share on two devices is refused",
        "both are said, the node first",
    ],
)
def test_kai_check_pod_refuses_a_named_node_and_a_share_on_several_devices(
    annotations: dict[str, str], spec: dict[str, Any], has_share: bool, rules: list[str]
) -> None:
    pod_view = view(pod(annotations=annotations, **spec))
    shares = [of_gpu(in_view(pod_view), "0.25")] if has_share else []
    assert [v.rule for v in backend().check_pod(pod_view, shares, [])] == rules


def test_kai_check_pod_says_what_kai_does_with_such_pods() -> None:
    pod_view = view(pod(annotations={"gpu-fraction-num-devices": "2"}, nodeName="gpu-7"))
    assigned, devices = backend().check_pod(pod_view, [of_gpu(in_view(pod_view), "0.5")], [])
    assert (
        "KAI Scheduler gives a GPU only through its scheduler (it takes such a pod for placed, "
        "holds no share for it, and never makes the ConfigMap its container needs to start)"
    ) in assigned.message
    assert devices.message == (
        'annotation gpu-fraction-num-devices "2" asks KAI for the share on several cards, and '
        "this webhook gives a share on one: remove the annotation, or ask for whole GPUs"
    )


# check: what KAI would not give as asked ----------------------------------------------------


@pytest.mark.parametrize(
    ("sharing", "share", "product", "record", "rules"),
    [
        (SHARING, ("gpu", "0.25"), A100, NO_RECORD, []),
        (SHARING, ("memory", 40900), A100, NO_RECORD, []),
        (SHARING, ("memory", 40960), A100, NO_RECORD, ["share-too-large"]),
        (SHARING, ("memory", 15301), T4, NO_RECORD, ["share-too-large"]),
        (SHARING, ("gpu", "0.004"), A100, NO_RECORD, ["share-too-small"]),
        (SHARING, ("gpu", "0.01"), A100, NO_RECORD, []),
        (SHARING, ("gpu", "0.125"), A100, NO_RECORD, []),
        (SHARING, ("annotation", "0.125"), A100, NO_RECORD, ["fraction-places"]),
        (SHARING, ("annotation", "0.12"), A100, NO_RECORD, []),
        (
            SHARING,
            ("annotation", "0.125"),
            A100,
            ShareRecord(annotations={"gpu-fraction": "0.125"}),
            [],
        ),
        (IN_GIB, ("gpu", "0.0675"), T4, NO_RECORD, ["share-too-small"]),
        (IN_GIB, ("gpu", "0.07"), T4, NO_RECORD, []),
    ],
    ids=[
        "a quarter of a card is given",
        "all the memory KAI counts of an A100 40GB, 40900 MiB, is given",
        "all of an A100 40GB's label, 40960 MiB, is more than KAI counts",
        "one MiB past a T4's floored 15300 is more than KAI counts",
        "under a hundredth of a card is given by KAI as 0.00",
        "a hundredth of a card is the least KAI gives",
        "a fraction the webhook writes rounds down itself",
        "a user's gpu-fraction with three decimals is refused",
        "a user's gpu-fraction with two decimals is given",
        "an annotation the webhook wrote is not the user's",
        "0.0675 of a T4 in GiB is held as 0.06, 918 MiB, under 1 GiB",
        "0.07 of a T4 in GiB is held as 1071 MiB, over 1 GiB",
    ],
)
def test_kai_check_refuses_a_share_kai_would_not_give_as_asked(
    sharing: Sharing, share: tuple[str, Any], product: str, record: ShareRecord, rules: list[str]
) -> None:
    sized_share = share_of(*share, sharing=sharing, product=product)
    found = backend(sharing, record).check([sized_share], view(pod()))
    assert [v.rule for v in found] == rules


@pytest.mark.parametrize(
    ("sharing", "share", "product", "message"),
    [
        (
            SHARING,
            ("memory", 40960),
            A100,
            'container "infer": example.com/vram=40960Mi is 40960 MiB, and KAI counts a '
            "NVIDIA-A100-SXM4-40GB as 40900 MiB (its memory label floored to 100 MiB): ask for "
            "at most 40900 MiB",
        ),
        (
            IN_GIB,
            ("memory", 40960),
            A100,
            'container "infer": example.com/vram=40960Mi is 40960 MiB, and KAI counts a '
            "NVIDIA-A100-SXM4-40GB as 40900 MiB (its memory label floored to 100 MiB): ask for "
            "at most 39 GiB",
        ),
        (
            SHARING,
            ("gpu", "0.004"),
            A100,
            'container "infer": nvidia.com/gpu=0.004 is less than 0.01 of a GPU, the least KAI '
            'gives (it keeps two decimals, and gives "0.00" with no memory limit): ask for at '
            "least 0.01",
        ),
        (
            SHARING,
            ("annotation", "0.125"),
            A100,
            'container "infer": gpu-fraction=0.125 has more than two decimals, and KAI keeps two '
            '(it passes the share on with "%.2f"): write "0.12" or "0.13"',
        ),
        (
            IN_GIB,
            ("gpu", "0.0675"),
            T4,
            'container "infer": nvidia.com/gpu=0.0675 is given by KAI as 0.06 of the card, 918 '
            "MiB of a Tesla-T4 as it counts it, less than 1 GiB of example.com/vram: ask for a "
            "larger share",
        ),
    ],
    ids=[
        "too large: the most KAI counts, in MiB",
        "too large: the most KAI counts, in whole GiB",
        "too small: the least KAI gives",
        "too many places: the two hundredths around it",
        "held under one unit: what KAI holds of the card",
    ],
)
def test_kai_check_says_what_kai_gives_and_what_to_write(
    sharing: Sharing, share: tuple[str, Any], product: str, message: str
) -> None:
    sized_share = share_of(*share, sharing=sharing, product=product)
    (found,) = backend(sharing).check([sized_share], view(pod()))
    assert found.message == message


# check: the pod around the share ------------------------------------------------------------


def _pod_rules(obj: dict[str, Any], record: ShareRecord = NO_RECORD) -> list[str]:
    pod_view = view(obj)
    shares = [
        sized(of_gpu(where, "0.25"), SHARING)
        for where in pod_view.containers
        if "resources" in where.raw
    ]
    return [v.rule for v in backend(SHARING, record).check(shares, pod_view)]


QUARTER = {"nvidia.com/gpu": "0.25"}
ONE = container(limits=QUARTER)
OWNED = {"ownerReferences": [{"kind": "Application", "name": "a"}]}


def _owned(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].update(OWNED)
    return obj


@pytest.mark.parametrize(
    ("obj", "record", "rules"),
    [
        (pod(ONE), NO_RECORD, []),
        (pod(ONE, container("side", limits=QUARTER)), NO_RECORD, ["one-share-per-pod"]),
        (pod(ONE, schedulerName="volcano"), NO_RECORD, ["scheduler-conflict"]),
        (pod(ONE, schedulerName="kai-scheduler"), NO_RECORD, []),
        (pod(ONE, schedulerName="volcano"), ShareRecord(scheduler_name="volcano"), []),
        (pod(ONE, labels={QUEUE: "team-b"}), NO_RECORD, []),
        (deployment(pod(ONE), labels={QUEUE: "team-a"}), NO_RECORD, []),
        (deployment(pod(ONE, labels={QUEUE: "team-a"}), labels={QUEUE: "team-a"}), NO_RECORD, []),
        (
            deployment(pod(ONE, labels={QUEUE: "team-b"}), labels={QUEUE: "team-a"}),
            NO_RECORD,
            ["queue-conflict"],
        ),
        (
            deployment(pod(ONE, labels={QUEUE: "team-b"}), labels={QUEUE: "team-a"}),
            ShareRecord(labels={QUEUE: "team-b"}),
            [],
        ),
        (deployment(pod(ONE), labels={QUEUE: ""}), NO_RECORD, ["queue-conflict"]),
        (
            _owned(deployment(pod(ONE, labels={QUEUE: "team-b"}), labels={QUEUE: "team-a"})),
            NO_RECORD,
            [],
        ),
        (
            deployment(
                pod(ONE, container("side", limits=QUARTER), labels={QUEUE: "b"}),
                labels={QUEUE: "a"},
            ),
            NO_RECORD,
            ["one-share-per-pod", "queue-conflict"],
        ),
    ],
    ids=[
        "one share in a plain pod is given",
        "shares in two containers are refused: the annotation is the pod's",
        "another scheduler than KAI's is a conflict",
        "KAI's own scheduler is no conflict",
        "a scheduler the webhook set for an earlier policy may be replaced",
        "a pod's own queue is its own",
        "the workload's queue alone is the one KAI reads",
        "the same queue on the workload and its template is no conflict",
        "a template queue KAI never reads, beside the workload's, is a conflict",
        "a template queue the webhook wrote is no conflict",
        "an empty workload queue names no queue",
        "a workload another object owns is not the top owner KAI reads",
        "each problem is said, the containers first and the queue last",
    ],
)
def test_kai_check_refuses_two_containers_another_scheduler_and_a_queue_kai_never_reads(
    obj: dict[str, Any], record: ShareRecord, rules: list[str]
) -> None:
    assert _pod_rules(obj, record) == rules


def test_kai_check_says_which_queue_kai_reads_and_which_it_never_does() -> None:
    obj = deployment(pod(ONE, labels={QUEUE: "team-b"}), labels={QUEUE: "team-a"})
    pod_view = view(obj)
    share = sized(of_gpu(in_view(pod_view), "0.25"), SHARING)
    (found,) = backend().check([share], pod_view)
    assert found.message == (
        'the workload\'s label kai.scheduler/queue: "team-a" is the queue KAI gives its pods, '
        'and their template names "team-b", which KAI never reads: write the same queue in '
        "both, or keep the workload's alone"
    )


# granted ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sharing", "share", "product", "units", "mib"),
    [
        (SHARING, ("gpu", "0.25"), A100, 10225, 10225),
        (SHARING, ("gpu", "0.125"), A100, 4908, 4908),
        (SHARING, ("gpu", "0.25"), T4, 3825, 3825),
        (SHARING, ("gpu", "0.57"), A100, 23312, 23312),
        (SHARING, ("gpu", "0.5"), H200, 71850, 71850),
        (IN_GIB, ("gpu", "0.25"), A100, 9, 9216),
    ],
    ids=[
        "a quarter of an A100 40GB is a quarter of the 40900 KAI counts",
        "0.125 is held as 0.12 of 40900, 4908 MiB",
        "a quarter of a T4 is a quarter of 15300",
        "0.57 of 40900 is held as KAI's float64 gives it, 23312",
        "half an H200 is half of 143700",
        "in GiB a quarter of an A100 40GB, 10225 MiB, is 9",
    ],
)
def test_kai_granted_is_what_kai_holds_of_a_fraction(
    sharing: Sharing, share: tuple[str, Any], product: str, units: int, mib: int
) -> None:
    sized_share = share_of(*share, sharing=sharing, product=product)
    granted = backend(sharing).granted(sized_share)
    assert (granted.units, granted.mib) == (units, mib)
    assert granted.intent is sized_share.intent


def test_kai_granted_is_a_gpu_memory_share_exactly() -> None:
    sized_share = share_of("memory", 4096)
    assert backend().granted(sized_share) is sized_share


# limit_mib and seen_mib ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sharing", "share", "product", "limit"),
    [
        (SHARING, ("gpu", "0.125"), A100, None),
        (CAPPED, ("gpu", "0.125"), A100, 4915),
        (CAPPED, ("gpu", "0.33"), H100, 26914),
        (CAPPED, ("gpu", "0.5"), H200, 71885),
        (CAPPED, ("memory", 10225), A100, 10240),
        (CAPPED, ("memory", 2863), A100, 3276),
        (CAPPED, ("memory", 40900), A100, 40960),
    ],
    ids=[
        "without KAI's isolator there is no cap",
        "0.125 is capped at 0.12 of the 40960 label, 4915 MiB",
        "0.33 of an H100 is capped at 26914 MiB",
        "half an H200 is capped at 71885 MiB",
        "10225 MiB is the portion 0.25, capped at 10240",
        "2863 MiB is the portion 0.08 in float64, capped at 3276",
        "all the memory KAI counts is the portion 1.00, the whole label",
    ],
)
def test_kai_limit_mib_is_the_cap_of_kais_hami_core_isolator(
    sharing: Sharing, share: tuple[str, Any], product: str, limit: int | None
) -> None:
    sized_share = share_of(*share, sharing=sharing, product=product)
    assert backend(sharing).limit_mib(sized_share) == limit


@pytest.mark.parametrize(
    ("sharing", "seen"),
    [(SHARING, 40960), (CAPPED, 4915)],
    ids=[
        "without the isolator a process sees the whole card",
        "under the isolator a process sees its cap as the card",
    ],
)
def test_kai_seen_mib_is_the_card_or_the_isolators_cap(sharing: Sharing, seen: int) -> None:
    assert backend(sharing).seen_mib(share_of("gpu", "0.125", sharing=sharing)) == seen


# render -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "annotations"),
    [
        (("gpu", "0.25"), {"gpu-fraction": "0.25"}),
        (("gpu", "250m"), {"gpu-fraction": "0.25"}),
        (("gpu", ".25"), {"gpu-fraction": ".25"}),
        (("gpu", "0.50"), {"gpu-fraction": "0.50"}),
        (("gpu", "5e-1"), {"gpu-fraction": "0.5"}),
        (("gpu", "0.125"), {"gpu-fraction": "0.12"}),
        (("gpu", "0.999"), {"gpu-fraction": "0.99"}),
        (("annotation", "0.3"), {"gpu-fraction": "0.3"}),
        (("memory", 4096), {"gpu-memory": "4096"}),
    ],
    ids=[
        "a plain decimal of hundredths is written as the user wrote it",
        "250m, which KAI's binder cannot parse, is written 0.25",
        "a decimal without its leading zero is one KAI parses",
        "a trailing zero is kept as written",
        "an exponent is written as the decimal it stands for",
        "0.125 is written in the hundredths KAI keeps, rounded down: 0.12",
        "0.999 is written 0.99, never a whole card",
        "a user's own gpu-fraction is written as it was",
        "an amount of memory is gpu-memory in MiB",
    ],
)
def test_kai_render_writes_gpu_fraction_in_hundredths_or_gpu_memory_in_mib(
    share: tuple[str, Any], annotations: dict[str, str]
) -> None:
    pod_view = view(pod())
    rendering = backend().render([share_of(*share, pod_view=pod_view)], pod_view)
    assert rendering.annotations == annotations
    assert rendering.containers == {"infer": ContainerRendering({})}
    assert rendering.default_labels == {QUEUE: "default-queue"}
    assert rendering.scheduler_name == "kai-scheduler"


@pytest.mark.parametrize(
    ("share", "product", "described"),
    [
        (("gpu", "0.125"), A100, "gpu-fraction=0.12 (capped at 4915 MiB)"),
        (("memory", 4096), T4, "gpu-memory=4096 (capped at 4147 MiB)"),
    ],
    ids=[
        "0.125 of an A100 40GB says the isolator's cap of 0.12",
        "4096 MiB of a T4 says the isolator's cap of 0.27",
    ],
)
def test_kai_render_describes_the_isolators_cap_under_hami_core(
    share: tuple[str, Any], product: str, described: str
) -> None:
    pod_view = view(pod())
    rendering = backend(CAPPED).render([share_of(*share, CAPPED, product, pod_view)], pod_view)
    assert rendering.containers["infer"].text == described
    assert rendering.containers["infer"].resources == {}


@pytest.mark.parametrize(
    ("containers", "annotations", "with_share", "named"),
    [
        ((container(),), {}, "infer", None),
        ((container(), container("sidecar")), {}, "sidecar", "sidecar"),
        (
            (container(), container("sidecar")),
            {"gpu-fraction-container-name": "sidecar"},
            "infer",
            "infer",
        ),
    ],
    ids=[
        "a share of the first container needs no name",
        "a share of another container is named",
        "a name the pod carries is written over with the share's own",
    ],
)
def test_kai_render_names_the_shares_container_where_kai_would_not_take_the_first(
    containers: tuple[dict[str, Any], ...],
    annotations: dict[str, str],
    with_share: str,
    named: str | None,
) -> None:
    pod_view = view(pod(*containers, annotations=annotations))
    share = sized(of_gpu(in_view(pod_view, with_share), "0.5"), SHARING)
    rendering = backend().render([share], pod_view)
    assert rendering.annotations.get("gpu-fraction-container-name") == named
    assert rendering.annotations["gpu-fraction"] == "0.5"


@pytest.mark.parametrize(
    ("obj", "queue"),
    [
        (pod(), "default-queue"),
        (pod(labels={QUEUE: "team-a"}), "team-a"),
        (deployment(pod(), labels={QUEUE: "team-x"}), "team-x"),
        (deployment(pod(labels={QUEUE: "team-t"}), labels={QUEUE: "team-x"}), "team-x"),
        (_owned(deployment(pod(labels={QUEUE: "team-t"}))), "team-t"),
        (_owned(deployment(pod())), "default-queue"),
    ],
    ids=[
        "a pod that names no queue gets the policy's",
        "a pod keeps the queue it names",
        "a workload's pods get the workload's queue",
        "the workload's queue comes before its template's",
        "behind an owner the webhook cannot see, the template's queue stays",
        "behind such an owner, without a queue, the policy's",
    ],
)
def test_kai_render_gives_the_queue_kai_reads(obj: dict[str, Any], queue: str) -> None:
    pod_view = view(obj)
    share = sized(of_gpu(in_view(pod_view), "0.5"), SHARING)
    assert backend().render([share], pod_view).default_labels == {QUEUE: queue}


def test_kai_render_names_the_scheduler_and_queue_of_the_policy() -> None:
    sharing = changed(SHARING, kai=KaiSettings(queue="research", scheduler_name="kai-2"))
    pod_view = view(pod())
    rendering = backend(sharing).render([share_of("gpu", "0.5", sharing, A100, pod_view)], pod_view)
    assert rendering.scheduler_name == "kai-2"
    assert rendering.default_labels == {QUEUE: "research"}
