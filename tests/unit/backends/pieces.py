"""What a backend's functions take, made as the engine makes them: the sharing settings of the
example policies, pods read into a `PodView`, and shares sized by `size_share`. Each test
module of this package builds its tables from these, so that a row reads as the pod it is."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

from tests.support import pod_objects
from tests.support.pod_objects import deployment as deployment
from tests.support.pod_objects import view as view
from webhook.engine.backends import backend_for
from webhook.engine.backends.rendering import ShareBackend
from webhook.engine.findings import ShareIntent
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.pod_spec import Container, PodView
from webhook.engine.share_record import NO_RECORD, ShareRecord
from webhook.engine.shares import SizedShare, size_share
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import Sharing
from webhook.quantity import parse_quantity

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
A100 = "NVIDIA-A100-SXM4-40GB"  # 40960 MiB, the examples' default model
H100 = "NVIDIA-H100-80GB-HBM3"  # 81559 MiB
H200 = "NVIDIA-H200"  # 143771 MiB
T4 = "Tesla-T4"  # 15360 MiB


@cache
def example_sharing(backend: str) -> Sharing:
    """The sharing of examples/policies/<backend>/policy.yaml."""
    (policy,) = load_policy_directory(EXAMPLES / "policies" / backend)
    assert policy.sharing is not None
    return policy.sharing


@cache
def dra_sharing(policy_name: str) -> Sharing:
    """The sharing of the policy of examples/dra that has this name."""
    policy = next(p for p in load_policy_directory(EXAMPLES / "dra") if p.name == policy_name)
    assert policy.sharing is not None
    return policy.sharing


def changed(sharing: Sharing, **fields: Any) -> Sharing:
    return replace(sharing, **fields)


def backend_of(
    sharing: Sharing,
    *,
    record: ShareRecord = NO_RECORD,
    inventory: MigInventory = NO_INVENTORY,
    policy_name: str = "pool",
) -> ShareBackend:
    return backend_for(sharing, policy_name, inventory, record)


def container(
    name: str = "infer",
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    **raw: Any,
) -> dict[str, Any]:
    return pod_objects.container(name, limits, requests, **raw)


def pod(*containers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A Pod of these containers (one named "infer" without resources where none is given)."""
    return pod_objects.pod(*containers, lone="infer", **fields)


def in_view(pod_view: PodView, name: str = "infer") -> Container:
    found = pod_view.container_named(name)
    assert found is not None
    return found


def of_gpu(where: Container, written: str, resource: str = "nvidia.com/gpu") -> ShareIntent:
    """A fraction of a GPU written as a quantity (`nvidia.com/gpu: 0.25`)."""
    return ShareIntent(where, "quantity", resource, written, parse_quantity(written))


def of_memory(where: Container, sharing: Sharing, mib: int) -> ShareIntent:
    """An amount of memory written on the VRAM resource, in MiB (`example.com/vram: 4096Mi`)."""
    units = mib // sharing.mib_per_unit
    return ShareIntent(where, "memory", sharing.vram_resource, f"{mib}Mi", None, units)


def of_annotation(where: Container, annotation: str, written: str) -> ShareIntent:
    """KAI's own annotation as a user wrote it: `gpu-fraction` or `gpu-memory` (MiB)."""
    if annotation == "gpu-fraction":
        return ShareIntent(
            where, "annotation", "nvidia.com/gpu", written, Fraction(written), annotation=annotation
        )
    return ShareIntent(
        where, "annotation", "example.com/vram", written, None, int(written), annotation=annotation
    )


def sized(intent: ShareIntent, sharing: Sharing, product: str | None = None) -> SizedShare:
    """The share as the engine sizes it on `product` (the policy's default model if none)."""
    model = sharing.models[product or sharing.default_model or ""]
    share = size_share(intent, model, sharing)
    assert isinstance(share, SizedShare), share
    return share
