"""ExtendedResourceBackend: `render` writes each share as the policy's VRAM resource in its
unit, and `check` refuses, on one-card nodes, a pod whose shares never fit that card."""

from __future__ import annotations

import pytest

from tests.unit.backends.pieces import (
    A100,
    H100,
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
from webhook.policy.model import MultiGpuNodes, NodePool, Sharing

SHARING = example_sharing("extended-resource")  # example.com/vram in MiB, one-card nodes
IN_GIB = changed(SHARING, unit="GiB")


@pytest.mark.parametrize(
    ("sharing", "written", "product", "resources", "text"),
    [
        (SHARING, "0.25", A100, {"example.com/vram": "10240"}, "example.com/vram=10240 MiB"),
        (SHARING, "0.25", T4, {"example.com/vram": "3840"}, "example.com/vram=3840 MiB"),
        (SHARING, "0.1", H100, {"example.com/vram": "8155"}, "example.com/vram=8155 MiB"),
        (IN_GIB, "0.25", A100, {"example.com/vram": "10"}, "example.com/vram=10 GiB"),
        (IN_GIB, "0.25", T4, {"example.com/vram": "3"}, "example.com/vram=3 GiB"),
    ],
    ids=[
        "a quarter of an A100 40GB is 10240 MiB",
        "a quarter of a T4 is 3840 MiB",
        "a tenth of an H100 is 8155 MiB, rounded down from 8155.9",
        "in GiB a quarter of an A100 40GB is 10",
        "in GiB a quarter of a T4, 3.75 GiB, is 3",
    ],
)
def test_extended_resource_render_writes_the_vram_resource_in_the_policys_unit(
    sharing: Sharing, written: str, product: str, resources: dict[str, str], text: str
) -> None:
    pod_view = view(pod())
    share = sized(of_gpu(in_view(pod_view), written), sharing, product)
    rendering = backend_of(sharing).render([share], pod_view)
    assert rendering.containers == {"infer": ContainerRendering(resources, text)}
    assert rendering.containers["infer"].tolerated == ("example.com/vram",)
    assert (rendering.annotations, rendering.default_labels) == ({}, {})
    assert rendering.scheduler_name is None


def test_extended_resource_render_gives_each_container_its_own_amount() -> None:
    pod_view = view(pod(container("infer"), container("embed")))
    shares = [
        sized(of_memory(in_view(pod_view, "infer"), SHARING, 4096), SHARING),
        sized(of_gpu(in_view(pod_view, "embed"), "0.5"), SHARING),
    ]
    rendering = backend_of(SHARING).render(shares, pod_view)
    assert {name: dict(r.resources) for name, r in rendering.containers.items()} == {
        "infer": {"example.com/vram": "4096"},
        "embed": {"example.com/vram": "20480"},
    }


SUMMED = changed(SHARING, nodes=NodePool(multi_gpu=MultiGpuNodes.SUM))


@pytest.mark.parametrize(
    ("sharing", "fractions", "rules"),
    [
        (SHARING, ("0.5", "0.6"), ["shares-exceed-card"]),
        (SHARING, ("0.5", "0.5"), []),
        (SHARING, ("0.9",), []),
        (SUMMED, ("0.5", "0.6"), []),
    ],
    ids=[
        "on one-card nodes two shares of 0.5 and 0.6 never fit the card",
        "two halves fill the one card exactly",
        "one share is checked when it is sized, not here",
        "where a node advertises the sum of its cards the shares may be on two",
    ],
)
def test_extended_resource_check_refuses_shares_that_never_fit_one_card(
    sharing: Sharing, fractions: tuple[str, ...], rules: list[str]
) -> None:
    names = [f"c{index}" for index in range(len(fractions))]
    pod_view = view(pod(*(container(name) for name in names)))
    shares = [
        sized(of_gpu(in_view(pod_view, name), written), sharing)
        for name, written in zip(names, fractions, strict=True)
    ]
    assert [v.rule for v in backend_of(sharing).check(shares, pod_view)] == rules


def test_extended_resource_check_says_the_sum_each_share_and_the_card() -> None:
    pod_view = view(pod(container("a"), container("b")))
    shares = [
        sized(of_gpu(in_view(pod_view, n), w), SHARING) for n, w in (("a", "0.5"), ("b", "0.6"))
    ]
    (found,) = backend_of(SHARING).check(shares, pod_view)
    assert found.message == (
        'the pod\'s shares add up to 45056 MiB at once (container "a" 20480 + container "b" '
        "24576), more than a NVIDIA-A100-SXM4-40GB has (40960 MiB), and they must share one "
        "card: no node can ever hold the pod; ask for less in each container"
    )
