"""TimeSlicingBackend: `render` gives each share one replica of the shared resource the
device plugin renames (`renameByDefault`), and says the size its env caps it at."""

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
from webhook.policy.model import Sharing

SHARING = example_sharing("time-slicing")  # nvidia.com/gpu.shared, MiB
RENAMED = changed(SHARING, shared_resource="nvidia.com/gpu.replica")
IN_GIB = changed(SHARING, unit="GiB")


@pytest.mark.parametrize(
    ("sharing", "share", "product", "resource", "text"),
    [
        (SHARING, ("gpu", "0.25"), A100, "nvidia.com/gpu.shared", "capped at 10240 MiB"),
        (SHARING, ("gpu", "0.25"), H200, "nvidia.com/gpu.shared", "capped at 35942 MiB"),
        (SHARING, ("memory", 4096), T4, "nvidia.com/gpu.shared", "capped at 4096 MiB"),
        (RENAMED, ("gpu", "0.5"), T4, "nvidia.com/gpu.replica", "capped at 7680 MiB"),
        (IN_GIB, ("gpu", "0.25"), T4, "nvidia.com/gpu.shared", "capped at 3072 MiB"),
    ],
    ids=[
        "a quarter of an A100 40GB is one replica capped at 10240 MiB",
        "a quarter of an H200 is one replica capped at 35942 MiB, rounded down",
        "4096 MiB of a T4 is one replica, whatever its size",
        "the replica is the resource the policy names",
        "in GiB the cap is the whole GiB of the share, 3 of a T4's quarter, in MiB",
    ],
)
def test_time_slicing_render_gives_one_replica_and_says_its_cap(
    sharing: Sharing, share: tuple[str, Any], product: str, resource: str, text: str
) -> None:
    pod_view = view(pod())
    where = in_view(pod_view)
    form, value = share
    intent = of_gpu(where, value) if form == "gpu" else of_memory(where, sharing, value)
    rendering = backend_of(sharing).render([sized(intent, sharing, product)], pod_view)
    assert rendering.containers == {
        "infer": ContainerRendering({resource: "1"}, f"{resource}=1 {text}")
    }
    assert rendering.containers["infer"].tolerated == (resource,)
    assert rendering.scheduler_name is None


def test_time_slicing_render_gives_every_container_with_a_share_a_replica_of_its_own() -> None:
    pod_view = view(pod(container("infer"), container("embed")))
    shares = [
        sized(of_gpu(in_view(pod_view, name), "0.25"), SHARING) for name in ("infer", "embed")
    ]
    rendering = backend_of(SHARING).render(shares, pod_view)
    assert {name: dict(r.resources) for name, r in rendering.containers.items()} == {
        "infer": {"nvidia.com/gpu.shared": "1"},
        "embed": {"nvidia.com/gpu.shared": "1"},
    }
