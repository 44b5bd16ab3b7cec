"""HamiBackend, one table per function: how it reads HAMi's own dialect (`read_native`,
`read_pod`, `per_card_shares`), what it refuses as HAMi's webhook would (`check_pod`,
`check`), the whole percent it gives (`percent`, `granted`), and what it writes (`render`).
The sharing is examples/policies/hami (MiB, scheduler hami-scheduler) or a variant of it."""

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
from webhook.engine.backends.hami import HamiBackend
from webhook.engine.backends.rendering import ContainerRendering, NativeRead
from webhook.engine.findings import ShareIntent, WholeGpu
from webhook.engine.share_record import NO_RECORD, ContainerShare, ShareRecord
from webhook.policy.model import Sharing

SHARING = example_sharing("hami")
GPU, MEM, PERCENT, CORES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/gpucores",
)


def hami(sharing: Sharing = SHARING, **settings: Any) -> Sharing:
    """The sharing with these HAMi settings changed (memory, cores, scheduler_name)."""
    return changed(sharing, hami=replace(sharing.hami, **settings))


def backend(sharing: Sharing = SHARING, record: ShareRecord = NO_RECORD) -> HamiBackend:
    found = backend_of(sharing, record=record)
    assert isinstance(found, HamiBackend)
    return found


# read_native --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "read"),
    [
        ({GPU: "1"}, None),
        ({"example.com/vram": "4Gi"}, None),
        ({GPU: "1", MEM: "3000"}, NativeRead(frozenset())),
        ({MEM: "3000"}, NativeRead(frozenset())),
        ({GPU: "2", MEM: "3000", CORES: "30"}, NativeRead(frozenset({CORES}))),
        ({GPU: "1", CORES: "30"}, NativeRead(frozenset({CORES}))),
        ({GPU: "1", PERCENT: "50"}, NativeRead(frozenset({GPU, PERCENT}))),
        ({GPU: "2", PERCENT: "50", CORES: "30"}, NativeRead(frozenset({GPU, PERCENT, CORES}))),
        ({GPU: "1", MEM: "3000", PERCENT: "50"}, NativeRead(frozenset({GPU, MEM, PERCENT}))),
        ({GPU: "0.5", MEM: "3000"}, NativeRead(frozenset())),
        ({GPU: "0.5", CORES: "30"}, NativeRead(frozenset({CORES}))),
    ],
    ids=[
        "whole GPUs alone are not HAMi's dialect",
        "the VRAM resource is the policy's, not HAMi's",
        "a card with memory on it is read as a share: the count and memory stay unclaimed",
        "memory without a count is one card's",
        "cards with memory and cores: only the cores are HAMi's to keep",
        "cores alone cap a whole card, and are claimed",
        "a percentage is left as written, the count with it",
        "a percentage over two cards with cores is left as written",
        "memory beside a percentage is left as written too",
        "a fraction of a card beside memory leaves both to be read as any",
        "a fraction of a card beside cores claims the cores alone",
    ],
)
def test_hami_read_native_claims_what_it_leaves_as_written(
    limits: dict[str, str], read: NativeRead | None
) -> None:
    where = in_view(view(pod(container(limits=limits))))
    assert backend().read_native(where) == read


@pytest.mark.parametrize(
    ("limits", "requests", "hints"),
    [
        ({GPU: "1", PERCENT: "99.1"}, None, [f'{PERCENT} limits "99.1"', 'such as "99"']),
        ({GPU: "1", CORES: "150"}, None, [f'{CORES} limits "150"', 'such as "100"']),
        ({GPU: "1", CORES: "1k"}, None, [f'{CORES} limits "1k"', 'such as "100"']),
        ({GPU: "1"}, {CORES: "-5"}, [f'{CORES} requests "-5"', 'such as "0"']),
        ({GPU: "1", PERCENT: "half"}, None, [f'{PERCENT} limits "half"', 'such as "0"']),
        ({GPU: "1", PERCENT: "50"}, {PERCENT: "49.5"}, [f'{PERCENT} requests "49.5"', '"49"']),
    ],
    ids=[
        "a percentage with a decimal is refused with the whole percent below it",
        "cores above 100 are refused with 100",
        "cores with a suffix past 100 are refused with 100",
        "negative cores in requests are refused with 0",
        "a percentage that is no number is refused with 0",
        "a whole percent in limits and a decimal in requests: the requests are named",
    ],
)
def test_hami_read_native_refuses_a_percent_hami_would_not_give_as_written(
    limits: dict[str, str], requests: dict[str, str] | None, hints: list[str]
) -> None:
    where = in_view(view(pod(container(limits=limits, requests=requests))))
    read = backend().read_native(where)
    assert read is not None
    (found,) = read.violations
    assert found.rule == "whole-percent"
    assert found.message.startswith('container "infer": ')
    assert "is not a whole percent from 0 to 100, the only values HAMi gives as written" in (
        found.message
    )
    for hint in hints:
        assert hint in found.message


@pytest.mark.parametrize(
    ("limits", "requests", "count"),
    [
        ({GPU: "1", PERCENT: "50", CORES: "30"}, None, 0),
        ({GPU: "1", PERCENT: "0", CORES: "100"}, None, 0),
        ({GPU: "1", PERCENT: "99.5", CORES: "101"}, None, 2),
        ({GPU: "1", PERCENT: "99.5"}, {PERCENT: "99.5"}, 1),
    ],
    ids=[
        "whole percents are given as written",
        "0 and 100 are whole percents",
        "the percentage and the cores are each refused",
        "one value wrong in limits and requests is said once",
    ],
)
def test_hami_read_native_says_each_resource_with_a_wrong_percent_once(
    limits: dict[str, str], requests: dict[str, str] | None, count: int
) -> None:
    where = in_view(view(pod(container(limits=limits, requests=requests))))
    read = backend().read_native(where)
    assert read is not None
    assert [v.rule for v in read.violations] == ["whole-percent"] * count


# read_pod -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        ({}, []),
        ({"gpu-fraction": "0.5"}, []),
        ({MEM: "4096"}, [MEM]),
        ({GPU: "1", CORES: "30", PERCENT: "50"}, [PERCENT, CORES, GPU]),
    ],
    ids=[
        "a pod without annotations is fine",
        "another backend's annotation is not HAMi's",
        "memory written as an annotation is refused",
        "each HAMi name written as an annotation is refused, the count last",
    ],
)
def test_hami_read_pod_refuses_hamis_names_written_as_annotations(
    annotations: dict[str, str], named: list[str]
) -> None:
    found = backend().read_pod(view(pod(annotations=annotations)))
    assert [v.rule for v in found] == ["hami-annotation"] * len(named)
    assert [v.message for v in found] == [
        f"annotation {name} is not read by HAMi, which takes it only from a container's "
        "resources.limits: move it there"
        for name in named
    ]


# per_card_shares ----------------------------------------------------------------------------


def _per_card(containers: list[dict[str, Any]], whole: list[tuple[str, str, int]]) -> Any:
    """Each container with `example.com/vram` asks 4096 MiB; returns the cards of each share
    and the whole GPUs left, as (container, resource, count)."""
    pod_view = view(pod(*containers))
    shares = [
        of_memory(where, SHARING, 4096)
        for where in pod_view.containers
        if "example.com/vram" in where.limits
    ]
    gpus = [WholeGpu(in_view(pod_view, name), resource, n) for name, resource, n in whole]
    per_card, left = backend().per_card_shares(shares, gpus)
    return (
        {share.container.name: share.cards for share in per_card},
        [(gpu.container.name, gpu.resource, gpu.count) for gpu in left],
    )


VRAM = {"example.com/vram": "4Gi"}


@pytest.mark.parametrize(
    ("containers", "whole", "cards", "left"),
    [
        (
            [container(limits={GPU: "2", **VRAM})],
            [("infer", GPU, 2)],
            {"infer": 2},
            [],
        ),
        (
            [container(limits={GPU: "1", **VRAM})],
            [("infer", GPU, 1)],
            {"infer": 1},
            [],
        ),
        ([container(limits=VRAM)], [], {"infer": 1}, []),
        (
            [container(limits={GPU: "2", **VRAM}), container("train", limits={GPU: "1"})],
            [("infer", GPU, 2), ("train", GPU, 1)],
            {"infer": 2},
            [("train", GPU, 1)],
        ),
        (
            [container(limits={GPU: "2", "nvidia.com/mig-1g.5gb": "1", **VRAM})],
            [("infer", GPU, 2), ("infer", "nvidia.com/mig-1g.5gb", 1)],
            {"infer": 2},
            [("infer", "nvidia.com/mig-1g.5gb", 1)],
        ),
        ([container(limits={GPU: "0", **VRAM})], [], {"infer": 1}, []),
        ([container(limits={GPU: "1.5", **VRAM})], [], {"infer": 1}, []),
    ],
    ids=[
        "two cards beside memory are that memory on each of two",
        "one card beside memory is taken out of the whole GPUs",
        "memory alone is on one card",
        "whole GPUs of another container stay whole",
        "another resource of the same container stays whole",
        "a count of 0 gives no cards",
        "a count that is no whole number gives no cards",
    ],
)
def test_hami_per_card_shares_gives_the_share_the_count_written_beside_it(
    containers: list[dict[str, Any]],
    whole: list[tuple[str, str, int]],
    cards: dict[str, int],
    left: list[tuple[str, str, int]],
) -> None:
    assert _per_card(containers, whole) == (cards, left)


def test_hami_per_card_shares_leaves_a_fraction_of_a_card_on_one() -> None:
    pod_view = view(pod(container(limits={GPU: "2"})))
    fraction = of_gpu(in_view(pod_view), "0.5")
    gpus = [WholeGpu(in_view(pod_view), GPU, 2)]
    assert backend().per_card_shares([fraction], gpus) == ([fraction], gpus)


# check_pod ----------------------------------------------------------------------------------

PRIVILEGED = {"securityContext": {"privileged": True}}
QUARTER = {GPU: "0.25"}


@pytest.mark.parametrize(
    ("sharing", "obj", "rules"),
    [
        (SHARING, pod(container(limits={"cpu": "1"}, **PRIVILEGED), nodeName="n"), []),
        (SHARING, pod(container(limits=QUARTER, **PRIVILEGED)), ["privileged-container"]),
        (
            SHARING,
            pod(container(limits=QUARTER), container("side", **PRIVILEGED)),
            ["privileged-container"],
        ),
        (
            SHARING,
            pod(container(limits=QUARTER), init=(container("setup", **PRIVILEGED),)),
            ["privileged-container"],
        ),
        (SHARING, pod(container(limits={GPU: "0"}), nodeName="gpu-7"), ["node-assigned"]),
        (SHARING, pod(container(requests={GPU: "1"}), nodeName="gpu-7"), ["node-assigned"]),
        (SHARING, pod(container(requests={MEM: "3000"}), nodeName="gpu-7"), []),
        (SHARING, pod(container(limits={MEM: "3000"}), nodeName="gpu-7"), ["node-assigned"]),
        (
            SHARING,
            pod(container(limits=QUARTER, **PRIVILEGED), nodeName="gpu-7"),
            ["privileged-container", "node-assigned"],
        ),
        (
            SHARING,
            pod(container(limits=QUARTER, **PRIVILEGED), schedulerName="volcano"),
            [],
        ),
        (
            SHARING,
            pod(container(limits=QUARTER), schedulerName="", nodeName="n"),
            ["node-assigned"],
        ),
        (
            SHARING,
            pod(container(limits=QUARTER), schedulerName="hami-scheduler", nodeName="n"),
            ["node-assigned"],
        ),
        (
            hami(scheduler_name=None),
            pod(container(limits=QUARTER), schedulerName="hami-scheduler", nodeName="n"),
            ["node-assigned"],
        ),
        (
            hami(scheduler_name="gpu-sched"),
            pod(container(limits=QUARTER), schedulerName="hami-scheduler", nodeName="n"),
            [],
        ),
    ],
    ids=[
        "a pod without a HAMi resource is not HAMi's to deny",
        "a privileged container with a share is denied",
        "a privileged sidecar of a pod with a share is denied",
        "a privileged init container of a pod with a share is denied",
        "even nvidia.com/gpu 0 makes a pod that names its node HAMi's to deny",
        "the count in requests alone makes the pod HAMi's",
        "memory in requests alone does not",
        "memory in limits alone does",
        "a privileged container and a node name are both said",
        "a pod another scheduler places is let through by HAMi's webhook",
        "an empty schedulerName is the default scheduler's",
        "the policy's own scheduler is checked",
        "where the policy names no scheduler the chart's hami-scheduler is HAMi's",
        "where the policy names its own scheduler the chart's is another",
    ],
)
def test_hami_check_pod_denies_what_hamis_webhook_denies(
    sharing: Sharing, obj: dict[str, Any], rules: list[str]
) -> None:
    found = backend(sharing).check_pod(view(obj), [], [])
    assert [v.rule for v in found] == rules


def test_hami_check_pod_quotes_hamis_own_words() -> None:
    obj = pod(container(limits=QUARTER), init=(container("setup", **PRIVILEGED),), nodeName="n")
    privileged, assigned = backend().check_pod(view(obj), [], [])
    assert privileged.message == (
        'init container "setup" is privileged, and HAMi denies every pod with a GPU in which a '
        'container is ("container setup is privileged"): a privileged container sees every '
        "card of its node, past any share; drop privileged, or run it in a pod without GPUs"
    )
    assert 'HAMi gives a GPU only through its scheduler (its webhook denies it: "pod has node ' in (
        assigned.message
    )


# percent ------------------------------------------------------------------------------------

WITH_RESERVED_T4 = changed(
    SHARING, models={**SHARING.models, T4: replace(SHARING.models[T4], reserved_mib=448)}
)


@pytest.mark.parametrize(
    ("sharing", "share", "product", "percent"),
    [
        (SHARING, ("gpu", "0.251"), A100, 25),
        (SHARING, ("gpu", "0.07"), A100, 7),
        (SHARING, ("gpu", "0.999"), T4, 99),
        (SHARING, ("memory", 4096), A100, 10),
        (SHARING, ("memory", 4095), A100, 9),
        (SHARING, ("memory", 409), A100, 0),
        (WITH_RESERVED_T4, ("gpu", "0.5"), T4, 48),
    ],
    ids=[
        "0.251 of a card is 25 percent, rounded down",
        "0.07 of a card is exactly 7 percent",
        "0.999 of a card is 99 percent, never 100",
        "4096 MiB of an A100 40GB is exactly 10 percent",
        "4095 MiB of an A100 40GB is 9 percent",
        "409 MiB of an A100 40GB is under 1 percent",
        "half of a T4's 14912 usable MiB is 48 percent of its 15360",
    ],
)
def test_hami_percent_is_the_share_of_the_whole_card_rounded_down(
    sharing: Sharing, share: tuple[str, Any], product: str, percent: int
) -> None:
    where = in_view(view(pod()))
    form, value = share
    intent = of_gpu(where, value) if form == "gpu" else of_memory(where, sharing, value)
    assert backend(sharing).percent(sized(intent, sharing, product)) == percent


def _recorded(given: dict[str, str]) -> tuple[HamiBackend, Any]:
    """A share of 13516 MiB read back from what the record says the webhook wrote."""
    record = ShareRecord(
        containers={"infer": ContainerShare("nvidia.com/gpu=0.33", "13516", given=given)}
    )
    where = in_view(view(pod(container(limits=given))))
    intent = ShareIntent(where, "vram", "example.com/vram", "13516", None, 13516, recorded=True)
    return backend(hami(memory="Percentage"), record), sized(intent, SHARING)


@pytest.mark.parametrize(
    ("given", "percent"),
    [({GPU: "1", PERCENT: "33"}, 33), ({GPU: "1", MEM: "13516"}, 32)],
    ids=[
        "a share read back keeps the percent the webhook wrote",
        "a share written in MiB is read back as its MiB's percent",
    ],
)
def test_hami_percent_of_a_recorded_share_never_drifts(given: dict[str, str], percent: int) -> None:
    hami_backend, share = _recorded(given)
    assert hami_backend.percent(share) == percent


# granted ------------------------------------------------------------------------------------

IN_PERCENT = hami(memory="Percentage")


@pytest.mark.parametrize(
    ("sharing", "written", "product", "units", "mib"),
    [
        (IN_PERCENT, "0.251", A100, 10240, 10240),
        (IN_PERCENT, "0.333", T4, 5068, 5068),
        (hami(changed(SHARING, unit="GiB"), memory="Percentage"), "0.251", A100, 10, 10240),
        (hami(changed(SHARING, unit="GiB"), memory="Percentage"), "0.333", T4, 4, 4096),
    ],
    ids=[
        "0.251 of an A100 40GB is given as 25 percent, 10240 MiB",
        "0.333 of a T4 is given as 33 percent, 5068 MiB",
        "in GiB 25 percent of an A100 40GB is 10",
        "in GiB 33 percent of a T4, 5068 MiB, is 4",
    ],
)
def test_hami_granted_in_percentage_is_the_whole_percent_hami_caps_at(
    sharing: Sharing, written: str, product: str, units: int, mib: int
) -> None:
    share = sized(of_gpu(in_view(view(pod())), written), sharing, product)
    granted = backend(sharing).granted(share)
    assert (granted.units, granted.mib) == (units, mib)
    assert granted.intent is share.intent


def test_hami_granted_in_mib_is_the_share_as_sized() -> None:
    share = sized(of_gpu(in_view(view(pod())), "0.251"), SHARING)
    assert backend().granted(share) is share


# check --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sharing", "spec", "record", "mib", "rules"),
    [
        (SHARING, {}, ShareRecord(), 4096, []),
        (SHARING, {"schedulerName": "volcano"}, ShareRecord(), 4096, ["scheduler-conflict"]),
        (
            SHARING,
            {"schedulerName": "volcano"},
            ShareRecord(scheduler_name="volcano"),
            4096,
            [],
        ),
        (hami(scheduler_name=None), {"schedulerName": "volcano"}, ShareRecord(), 4096, []),
        (SHARING, {}, ShareRecord(), 100, []),
        (IN_PERCENT, {}, ShareRecord(), 409, ["share-too-small"]),
        (IN_PERCENT, {}, ShareRecord(), 410, []),
        (hami(cores=True), {}, ShareRecord(), 100, ["share-too-small"]),
        (
            IN_PERCENT,
            {"schedulerName": "volcano"},
            ShareRecord(),
            100,
            ["scheduler-conflict", "share-too-small"],
        ),
    ],
    ids=[
        "a share under no named scheduler is given",
        "another scheduler than the policy's is a conflict",
        "a scheduler the webhook set for an earlier policy may be replaced",
        "a policy that names no scheduler leaves the pod's alone",
        "in MiB a share under 1 percent is given as written",
        "in percent 409 MiB of an A100 40GB is under the least HAMi gives",
        "in percent 410 MiB of an A100 40GB is 1 percent",
        "with cores a share under 1 percent would have no cores",
        "the conflict is said before the size",
    ],
)
def test_hami_check_refuses_another_scheduler_and_a_share_under_one_percent(
    sharing: Sharing, spec: dict[str, Any], record: ShareRecord, mib: int, rules: list[str]
) -> None:
    pod_view = view(pod(**spec))
    share = sized(of_memory(in_view(pod_view), sharing, mib), sharing)
    assert [v.rule for v in backend(sharing, record).check([share], pod_view)] == rules


def test_hami_check_says_the_share_and_the_card_of_one_under_one_percent() -> None:
    pod_view = view(pod())
    share = sized(of_memory(in_view(pod_view), SHARING, 100), IN_PERCENT)
    (found,) = backend(IN_PERCENT).check([share], pod_view)
    assert found.message == (
        'container "infer": example.com/vram=100Mi (100 MiB) is less than 1% of a '
        "NVIDIA-A100-SXM4-40GB, the least HAMi gives"
    )


# render -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sharing", "limits", "cards", "resources"),
    [
        (SHARING, {}, 1, {GPU: "1", MEM: "10280"}),
        (IN_PERCENT, {}, 1, {GPU: "1", PERCENT: "25"}),
        (hami(cores=True), {}, 1, {GPU: "1", MEM: "10280", CORES: "25"}),
        (hami(memory="Percentage", cores=True), {}, 1, {GPU: "1", PERCENT: "25", CORES: "25"}),
        (SHARING, {}, 2, {GPU: "2", MEM: "10280"}),
        (hami(cores=True), {CORES: "30"}, 1, {GPU: "1", MEM: "10280"}),
    ],
    ids=[
        "in MiB 0.251 of an A100 40GB is one card with 10280 MiB",
        "in percent it is one card with 25 percent of its memory",
        "with cores the cores are the same whole percent",
        "in percent with cores both are 25",
        "a share on two cards asks for two",
        "cores the user wrote stay theirs and are not written",
    ],
)
def test_hami_render_writes_the_count_and_the_memory_in_the_policys_form(
    sharing: Sharing, limits: dict[str, str], cards: int, resources: dict[str, str]
) -> None:
    pod_view = view(pod(container(limits=limits or None)))
    intent = replace(of_gpu(in_view(pod_view), "0.251"), cards=cards)
    rendering = backend(sharing).render([sized(intent, sharing)], pod_view)
    assert rendering.containers == {"infer": ContainerRendering(resources, node_resources=(GPU,))}
    assert rendering.containers["infer"].tolerated == (GPU,)
    assert rendering.scheduler_name == sharing.hami.scheduler_name


def test_hami_render_writes_cores_again_where_the_record_says_the_webhook_wrote_them() -> None:
    given = {GPU: "1", MEM: "10280", CORES: "20"}
    record = ShareRecord(
        containers={"infer": ContainerShare("nvidia.com/gpu=0.251", "10280", given=given)}
    )
    pod_view = view(pod(container(limits=given)))
    share = sized(of_gpu(in_view(pod_view), "0.251"), SHARING)
    rendering = backend(hami(cores=True), record).render([share], pod_view)
    assert rendering.containers["infer"].resources == {GPU: "1", MEM: "10280", CORES: "25"}


def test_hami_render_reads_as_its_resources_and_names_the_policys_scheduler() -> None:
    pod_view = view(pod())
    share = sized(of_gpu(in_view(pod_view), "0.25"), SHARING)
    rendering = backend().render([share], pod_view)
    assert rendering.containers["infer"].text == "nvidia.com/gpu=1, nvidia.com/gpumem=10240"
    assert rendering.scheduler_name == "hami-scheduler"
    assert (rendering.annotations, rendering.default_labels) == ({}, {})
    assert backend(hami(scheduler_name=None)).render([share], pod_view).scheduler_name is None
