"""gpu_requests.py: the GPU request rules, container by container, and the shares and whole
GPUs a pod asks for in resources and in KAI's annotations."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from tests.unit.engine.builders import GPU, VRAM, container, pod, policy, sharing, view
from webhook.engine.backends.rendering import NativeRead, ShareBackend
from webhook.engine.findings import Violation
from webhook.engine.gpu_requests import GpuRequests, asks_for, mentions_gpu, read_gpu_requests
from webhook.engine.pod_spec import Container, MalformedObject, PodView
from webhook.engine.share_record import ContainerShare, ShareRecord
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.model import Policy

SHARED = policy(sharing())
IN_GIB = policy(sharing(unit="GiB"))
WHOLE_ONLY = policy()


def summary(found: GpuRequests) -> tuple[list[str], list[tuple[Any, ...]], list[tuple[str, int]]]:
    """The rules broken, the shares (source, resource, written, fraction, units, in requests)
    and the whole GPUs (resource, count)."""
    shares = [
        (s.source, s.resource, s.written, s.fraction, s.vram_units, s.in_requests)
        for s in found.shares
    ]
    return [v.rule for v in found.violations], shares, [(w.resource, w.count) for w in found.whole]


def read(obj: dict[str, Any], rules: Policy = SHARED, **options: Any) -> GpuRequests:
    return read_gpu_requests(view(obj), rules, **options)


# asks_for, mentions_gpu -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "spec", "asks"),
    [
        ({}, {"containers": [{"name": "c"}]}, False),
        ({}, {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}, False),
        ({}, {}, False),
        ({"gpu-fraction-container-name": "c"}, {"containers": [{"name": "c"}]}, False),
        ({"gpu-fraction": "0.5"}, {"containers": [{"name": "c"}]}, True),
        ({"gpu-memory": "4096"}, {"containers": [{"name": "c"}]}, True),
        ({SHARES_ANNOTATION: "{}"}, {"containers": [{"name": "c"}]}, True),
        ({}, {"containers": [{"name": "c", "resources": {"limits": {GPU: "1"}}}]}, True),
        ({}, {"containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}]}, True),
        ({}, {"initContainers": [{"name": "i", "resources": {"limits": {GPU: "1"}}}]}, True),
        ({}, {"containers": "c"}, True),
        ({}, {"containers": [5]}, True),
        ({}, {"containers": [{"image": "x"}]}, True),
        ({}, {"containers": [{"name": "c", "resources": None}]}, True),
        ({}, {"containers": [{"name": "c", "resources": {"limits": None}}]}, True),
    ],
    ids=[
        "a container without resources",
        "a container with other resources",
        "a spec without containers",
        "the container annotation alone asks for nothing",
        "a fraction annotation",
        "a memory annotation",
        "the webhook's record",
        "a GPU in the limits",
        "a GPU in the requests",
        "a GPU in an init container",
        "containers of the wrong type, left to the full reading",
        "a container of the wrong type",
        "a container without a name",
        "resources that are null",
        "limits that are null",
    ],
)
def test_asks_for_a_gpu_in_annotations_or_resources(
    annotations: dict[str, Any], spec: dict[str, Any], asks: bool
) -> None:
    assert asks_for(annotations, spec, lambda name: name == GPU) is asks


@pytest.mark.parametrize(
    ("limits", "rules", "mentions"),
    [
        ({GPU: "1"}, SHARED, True),
        ({GPU: "1"}, WHOLE_ONLY, True),
        ({VRAM: "4096"}, SHARED, True),
        ({VRAM: "4096"}, WHOLE_ONLY, False),
        ({"nvidia.com/mig-1g.5gb": "1"}, SHARED, True),
        ({"gpu.intel.com/i915": "1"}, SHARED, False),
        ({"cpu": "1"}, SHARED, False),
    ],
    ids=[
        "a governed GPU",
        "a governed GPU where nothing is shared",
        "the VRAM resource of a sharing policy",
        "the VRAM resource where nothing is shared",
        "a resource of a governed family",
        "a GPU the policy does not govern",
        "no GPU",
    ],
)
def test_mentions_gpu_the_policy_governs(
    limits: dict[str, str], rules: Policy, mentions: bool
) -> None:
    assert mentions_gpu(view(pod(container("c", limits))), rules) is mentions


# read_gpu_requests: resources -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "requests", "rules", "shares", "whole"),
    [
        ({GPU: "250m"}, None, SHARED, [("quantity", GPU, "250m", Fraction(1, 4), None, False)], []),
        (
            {GPU: "0.5"},
            {GPU: "500m"},
            SHARED,
            [("quantity", GPU, "0.5", Fraction(1, 2), None, True)],
            [],
        ),
        ({GPU: "2"}, None, SHARED, [], [(GPU, 2)]),
        ({GPU: 1}, {GPU: "1000m"}, SHARED, [], [(GPU, 1)]),
        ({GPU: "0"}, None, SHARED, [], []),
        ({"amd.com/gpu": "1"}, None, SHARED, [], [("amd.com/gpu", 1)]),
        ({"nvidia.com/mig-1g.5gb": "2"}, None, SHARED, [], [("nvidia.com/mig-1g.5gb", 2)]),
        ({"gpu.intel.com/i915": "0.5", "cpu": "0.5"}, None, SHARED, [], []),
        ({VRAM: "4096"}, None, SHARED, [("vram", VRAM, "4096", None, 4096, False)], []),
        ({VRAM: "4Gi"}, None, SHARED, [("memory", VRAM, "4Gi", None, 4096, False)], []),
        (
            {VRAM: "512Mi"},
            {VRAM: "512Mi"},
            SHARED,
            [("memory", VRAM, "512Mi", None, 512, True)],
            [],
        ),
        ({VRAM: "4Gi"}, None, IN_GIB, [("memory", VRAM, "4Gi", None, 4, False)], []),
        ({VRAM: "0"}, None, SHARED, [], []),
        ({VRAM: "0Gi"}, None, SHARED, [], []),
        ({VRAM: "4096"}, None, WHOLE_ONLY, [], []),
    ],
    ids=[
        "a fraction of a shared GPU",
        "requests equal to limits as another spelling",
        "whole GPUs",
        "a number, with requests in millis",
        "none",
        "a whole GPU of a resource not shared",
        "whole MIG devices of a governed family",
        "resources the policy does not govern",
        "units of VRAM",
        "an amount of memory in the policy's MiB",
        "an amount of memory in requests too",
        "an amount of memory in the policy's GiB",
        "no VRAM",
        "no memory",
        "the VRAM resource of no sharing policy is not read",
    ],
)
def test_read_gpu_requests_finds_the_shares_and_whole_gpus_of_a_container(
    limits: dict[str, Any],
    requests: dict[str, Any] | None,
    rules: Policy,
    shares: list[tuple[Any, ...]],
    whole: list[tuple[str, int]],
) -> None:
    assert summary(read(pod(container("c", limits, requests)), rules)) == ([], shares, whole)


@pytest.mark.parametrize(
    ("limits", "requests", "rules", "rule", "message"),
    [
        (
            None,
            {GPU: "1"},
            SHARED,
            "limits-required",
            'container "c": nvidia.com/gpu is in requests ("1") but not in limits: GPU resources '
            "are given under limits; move it to resources.limits",
        ),
        (
            {GPU: "1"},
            {GPU: "2"},
            SHARED,
            "requests-equal-limits",
            'container "c": nvidia.com/gpu requests "2" differ from limits "1": for GPU resources '
            'requests must equal limits; write "1" in both, or leave requests out',
        ),
        (
            {GPU: "-1"},
            None,
            SHARED,
            "not-negative",
            'container "c": nvidia.com/gpu "-1" is negative: ask for a whole number of GPUs, or a '
            "fraction between 0 and 1",
        ),
        (
            {"amd.com/gpu": "-1"},
            None,
            SHARED,
            "not-negative",
            'container "c": amd.com/gpu "-1" is negative: ask for a whole number of GPUs',
        ),
        (
            {VRAM: "-1Gi"},
            None,
            SHARED,
            "not-negative",
            'container "c": example.com/vram "-1Gi" is negative: ask for a whole number of units',
        ),
        (
            {GPU: "1.5"},
            None,
            SHARED,
            "whole-number",
            'container "c": nvidia.com/gpu "1.5" is not a whole number: a share above one GPU '
            "cannot be given; ask for 1 or 2",
        ),
        (
            {GPU: "2500m"},
            None,
            WHOLE_ONLY,
            "whole-number",
            'container "c": nvidia.com/gpu "2500m" is not a whole number: a share above one GPU '
            "cannot be given; ask for 2 or 3",
        ),
        (
            {GPU: "1Gi"},
            None,
            SHARED,
            "count-with-suffix",
            'container "c": nvidia.com/gpu "1Gi" counts GPUs, and the suffix makes it 1073741824 '
            "of them: for GPU memory write example.com/vram: 1Gi (given in MiB), or a fraction "
            "such as nvidia.com/gpu: 0.5",
        ),
        (
            {GPU: "2k"},
            None,
            IN_GIB,
            "count-with-suffix",
            'container "c": nvidia.com/gpu "2k" counts GPUs, and the suffix makes it 2000 of '
            "them: for GPU memory write example.com/vram: 4Gi (given in GiB), or a fraction "
            "such as nvidia.com/gpu: 0.5",
        ),
        (
            {"amd.com/gpu": "1k"},
            None,
            SHARED,
            "count-with-suffix",
            'container "c": amd.com/gpu "1k" counts GPUs, and the suffix makes it 1000 of them: '
            "ask for a whole number of GPUs",
        ),
        (
            {"amd.com/gpu": "0.5"},
            None,
            SHARED,
            "fraction-denied",
            'container "c": amd.com/gpu "0.5" is a fraction of a GPU, and policy "pool" does not '
            "share amd.com/gpu: ask for 1 whole GPU",
        ),
        (
            {GPU: "250m"},
            None,
            WHOLE_ONLY,
            "fraction-denied",
            'container "c": nvidia.com/gpu "250m" is a fraction of a GPU, and policy "pool" does '
            "not share nvidia.com/gpu: ask for 1 whole GPU",
        ),
        (
            {GPU: "lots"},
            None,
            SHARED,
            "malformed-quantity",
            "container \"c\": nvidia.com/gpu limits: 'lots' is not a quantity (examples: 1, 0.5, "
            "500m, 16Gi)",
        ),
        (
            {GPU: "1"},
            {GPU: "one"},
            SHARED,
            "malformed-quantity",
            "container \"c\": nvidia.com/gpu requests: 'one' is not a quantity (examples: 1, 0.5, "
            "500m, 16Gi)",
        ),
        (
            {VRAM: "1.5"},
            None,
            SHARED,
            "whole-number",
            'container "c": example.com/vram "1.5" is not a whole number: ask for a whole number '
            "of units, or for a fraction of a GPU and let the webhook size it",
        ),
        (
            {VRAM: "1536Ki"},
            None,
            SHARED,
            "whole-units",
            'container "c": example.com/vram "1536Ki" is not a whole number of MiB, the unit it '
            'is given in: ask for "2Mi" (or "2"), or for a fraction of a GPU',
        ),
        (
            {VRAM: "1536Mi"},
            None,
            IN_GIB,
            "whole-units",
            'container "c": example.com/vram "1536Mi" is not a whole number of GiB, the unit it '
            'is given in: ask for "2Gi" (or "2"), or for a fraction of a GPU',
        ),
    ],
    ids=[
        "a GPU in requests alone",
        "requests that differ from limits",
        "a negative GPU that may be shared",
        "a negative GPU that may not",
        "negative memory",
        "more than one GPU and a part",
        "the same where nothing is shared",
        "a memory suffix on a GPU count",
        "a decimal suffix on a GPU count, in a GiB pool",
        "a suffix on a GPU nothing shares",
        "a fraction of a GPU the policy does not share",
        "a fraction where the policy shares nothing",
        "a limit that is no quantity",
        "a request that is no quantity",
        "VRAM units that are not whole",
        "memory that is no whole MiB",
        "memory that is no whole GiB",
    ],
)
def test_read_gpu_requests_names_the_rule_a_container_breaks(
    limits: dict[str, Any] | None,
    requests: dict[str, Any] | None,
    rules: Policy,
    rule: str,
    message: str,
) -> None:
    found = read(pod(container("c", limits, requests)), rules)
    assert found.violations == [Violation(rule, message)]
    assert (found.shares, found.whole) == ([], [])


@pytest.mark.parametrize("amount", [True, None, ["1"]], ids=["a boolean", "null", "a list"])
def test_read_gpu_requests_refuses_an_amount_that_is_no_quantity_by_its_field(amount: Any) -> None:
    with pytest.raises(MalformedObject) as caught:
        read(pod(container("c", {GPU: amount})))
    assert str(caught.value) == (
        'spec.containers[0].resources.limits.nvidia.com/gpu: must be a quantity such as "1" or '
        '"500m"'
    )


def test_read_gpu_requests_reads_every_container_init_ones_first() -> None:
    obj = pod(
        container("a", {GPU: "0.5"}),
        container("b", {"amd.com/gpu": "0.5"}),
        init=(container("warmup", {GPU: "1"}),),
    )
    found = read(obj)
    assert [v.rule for v in found.violations] == ["fraction-denied"]
    assert [(s.container.name, s.fraction) for s in found.shares] == [("a", Fraction(1, 2))]
    assert [(w.container.label, w.count) for w in found.whole] == [('init container "warmup"', 1)]


# read_gpu_requests: annotations -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "rules", "share"),
    [
        ({"gpu-fraction": "0.5"}, SHARED, ("annotation", GPU, "0.5", Fraction(1, 2), None, False)),
        (
            {"gpu-fraction": "250m"},
            SHARED,
            ("annotation", GPU, "250m", Fraction(1, 4), None, False),
        ),
        ({"gpu-memory": "4096"}, SHARED, ("annotation", VRAM, "4096", None, 4096, False)),
        ({"gpu-memory": "2048"}, IN_GIB, ("annotation", VRAM, "2048", None, 2, False)),
    ],
    ids=[
        "a fraction of the card",
        "a fraction in millis",
        "MiB of memory",
        "MiB of memory in the policy's GiB",
    ],
)
def test_read_gpu_requests_reads_a_share_annotation_for_the_first_container(
    annotations: dict[str, str], rules: Policy, share: tuple[Any, ...]
) -> None:
    obj = pod(container("a"), container("b"), init=(container("i"),), annotations=annotations)
    found = read(obj, rules)
    assert summary(found) == ([], [share], [])
    assert found.shares[0].container.name == "a"
    assert found.shares[0].annotation == next(iter(annotations))


def test_read_gpu_requests_gives_the_annotated_share_to_the_container_named() -> None:
    annotations = {"gpu-fraction": "0.5", "gpu-fraction-container-name": "b"}
    found = read(pod(container("a"), container("b"), annotations=annotations))
    assert [s.container.name for s in found.shares] == ["b"]


@pytest.mark.parametrize(
    ("obj", "rules", "rule", "message"),
    [
        (
            pod(annotations={"gpu-fraction": "1"}),
            SHARED,
            "annotation-fraction",
            'annotation gpu-fraction "1" must be a number between 0 and 1, such as "0.5"; for '
            "whole GPUs ask for them in resources.limits",
        ),
        (
            pod(annotations={"gpu-fraction": "half"}),
            SHARED,
            "annotation-fraction",
            'annotation gpu-fraction "half" must be a number between 0 and 1, such as "0.5"; for '
            "whole GPUs ask for them in resources.limits",
        ),
        (
            pod(annotations={"gpu-memory": "4Gi"}),
            SHARED,
            "annotation-memory",
            'annotation gpu-memory "4Gi" must be a positive whole number of MiB with no suffix, '
            'such as "2048"',
        ),
        (
            pod(annotations={"gpu-memory": "0"}),
            SHARED,
            "annotation-memory",
            'annotation gpu-memory "0" must be a positive whole number of MiB with no suffix, '
            'such as "2048"',
        ),
        (
            pod(annotations={"gpu-memory": "1500"}),
            IN_GIB,
            "whole-units",
            'annotation gpu-memory "1500" is not a whole number of GiB, the unit '
            'example.com/vram is given in: ask for "2048"',
        ),
        (
            pod(annotations={"gpu-fraction": "0.5", "gpu-memory": "4096"}),
            SHARED,
            "annotation-conflict",
            "annotations gpu-fraction and gpu-memory both ask for a share of a GPU: keep one of "
            "the two",
        ),
        (
            pod(
                container("a"),
                container("b"),
                init=(container("i"),),
                annotations={"gpu-fraction": "0.5", "gpu-fraction-container-name": "nope"},
            ),
            SHARED,
            "annotation-container",
            'annotation gpu-fraction-container-name names "nope", which is not a container of '
            "this pod (i, a, b)",
        ),
        (
            {
                "metadata": {"annotations": {"gpu-memory": "4096"}},
                "spec": {"initContainers": [{"name": "i"}]},
            },
            SHARED,
            "annotation-container",
            "annotation gpu-memory asks for a share of a GPU, but the pod has no container",
        ),
        (
            pod(container("c", {GPU: "1"}), annotations={"gpu-fraction": "0.5"}),
            SHARED,
            "annotation-conflict",
            'annotation gpu-fraction and resources of container "c" both ask for GPUs: keep one '
            "of the two",
        ),
        (
            pod(container("c", {VRAM: "4Gi"}), annotations={"gpu-fraction": "0.5"}),
            SHARED,
            "annotation-conflict",
            'annotation gpu-fraction and resources of container "c" both ask for GPUs: keep one '
            "of the two",
        ),
        (
            pod(annotations={"gpu-fraction": "0.5"}),
            WHOLE_ONLY,
            "fraction-denied",
            'annotation gpu-fraction "0.5" asks for a share of a GPU, and policy "pool" shares '
            "no GPU resource: ask for 1 whole GPU in resources.limits",
        ),
        (
            pod(annotations={"gpu-memory": "4096"}),
            WHOLE_ONLY,
            "fraction-denied",
            'annotation gpu-memory "4096" asks for a share of a GPU, and policy "pool" shares '
            "no GPU resource: ask for 1 whole GPU in resources.limits",
        ),
    ],
    ids=[
        "a whole card by annotation",
        "a fraction that is no number",
        "memory with a suffix",
        "no memory",
        "memory that is no whole GiB",
        "both annotations",
        "a container the pod lacks",
        "a pod of init containers alone",
        "an annotation beside whole GPUs",
        "an annotation beside an amount of memory",
        "an annotation where nothing is shared",
        "a memory annotation where nothing is shared",
    ],
)
def test_read_gpu_requests_names_the_rule_a_share_annotation_breaks(
    obj: dict[str, Any], rules: Policy, rule: str, message: str
) -> None:
    found = read(obj, rules)
    assert found.violations == [Violation(rule, message)]
    assert [s for s in found.shares if s.source == "annotation"] == []


def test_read_gpu_requests_keeps_the_vram_written_beside_an_annotation_for_the_plan() -> None:
    found = read(pod(container("c", {VRAM: "3840"}), annotations={"gpu-fraction": "0.25"}))
    assert summary(found)[1] == [
        ("vram", VRAM, "3840", None, 3840, False),
        ("annotation", GPU, "0.25", Fraction(1, 4), None, False),
    ]


def test_read_gpu_requests_passes_over_an_annotation_the_webhook_wrote_beside_whole_gpus() -> None:
    obj = pod(container("c", {GPU: "1"}), annotations={"gpu-fraction": "0.5"})
    record = ShareRecord(annotations={"gpu-fraction": "0.5"})
    assert summary(read(obj, record=record)) == ([], [], [(GPU, 1)])


# read_gpu_requests: what the webhook wrote before ------------------------------------------------

TIME_SLICED = ContainerShare(
    "nvidia.com/gpu=0.25", "3840", given={"nvidia.com/gpu.shared": "1"}, mib="3840"
)
HAMI_CARD = ContainerShare(
    "nvidia.com/gpu=0.25",
    "3840",
    given={GPU: "1", "nvidia.com/gpumem": "3840"},
    mib="3840",
)


@pytest.mark.parametrize(
    ("limits", "entry", "rules", "shares", "whole"),
    [
        (
            {"nvidia.com/gpu.shared": "1"},
            TIME_SLICED,
            SHARED,
            [("vram", "nvidia.com/gpu.shared", "3840", None, 3840, False)],
            [],
        ),
        (
            {GPU: "1", "nvidia.com/gpumem": "3840"},
            HAMI_CARD,
            SHARED,
            [("vram", GPU, "3840", None, 3840, False)],
            [],
        ),
        (
            {"nvidia.com/gpu.shared": "1"},
            TIME_SLICED,
            IN_GIB,
            [("vram", "nvidia.com/gpu.shared", "3840", None, 3, False)],
            [],
        ),
        ({GPU: "1", "nvidia.com/gpumem": "4000"}, HAMI_CARD, SHARED, [], [(GPU, 1)]),
        (
            {GPU: "1", "nvidia.com/gpumem": "3840"},
            ContainerShare("a", "3840", given={GPU: "1", "nvidia.com/gpumem": "3840"}, mib="x"),
            SHARED,
            [],
            [(GPU, 1)],
        ),
    ],
    ids=[
        "a time-sliced replica reads back as its share",
        "a backend's one card is the share, not a whole GPU",
        "read in the policy's unit of now, rounded down",
        "resources changed since are the user's",
        "a record edited by hand counts as none",
    ],
)
def test_read_gpu_requests_reads_back_the_resources_the_record_says_the_webhook_wrote(
    limits: dict[str, str],
    entry: ContainerShare,
    rules: Policy,
    shares: list[tuple[Any, ...]],
    whole: list[tuple[str, int]],
) -> None:
    record = ShareRecord("Tesla-T4", True, {"c": entry})
    found = read(pod(container("c", limits)), rules, record=record)
    assert summary(found) == ([], shares, whole)
    assert all(share.recorded for share in found.shares)


def dra_pod(template: str) -> dict[str, Any]:
    obj = pod(container("c", resources={"claims": [{"name": "c-gpu"}]}))
    obj["spec"]["resourceClaims"] = [{"name": "c-gpu", "resourceClaimTemplateName": template}]
    return obj


@pytest.mark.parametrize(
    ("template", "shares"),
    [("share-3840", [("vram", VRAM, "3840", None, 3840, False)]), ("theirs", [])],
    ids=["from the recorded template", "a claim made from another template is the user's"],
)
def test_read_gpu_requests_reads_back_a_dra_claim_the_webhook_wrote(
    template: str, shares: list[tuple[Any, ...]]
) -> None:
    entry = ContainerShare(
        "nvidia.com/gpu=0.25", "3840", mib="3840", claim="c-gpu", template="share-3840"
    )
    found = read(dra_pod(template), record=ShareRecord("Tesla-T4", True, {"c": entry}))
    assert summary(found) == ([], shares, [])


class ReadsItsOwnDialect(ShareBackend):
    def read_native(self, container: Container) -> NativeRead | None:
        if GPU not in container.limits:
            return None
        return NativeRead(frozenset({GPU}), (Violation("native-rule", container.name),))

    def read_pod(self, pod: PodView) -> list[Violation]:
        return [Violation("pod-rule", "the backend's own")]


def test_read_gpu_requests_leaves_what_the_backend_claims_to_it() -> None:
    backend = ReadsItsOwnDialect(sharing(), "pool")
    obj = pod(container("a", {GPU: "1"}), container("b", {"amd.com/gpu": "1"}))
    found = read(obj, backend=backend)
    assert summary(found) == (["native-rule", "pod-rule"], [], [("amd.com/gpu", 1)])
