"""Small literal inputs for the unit tests of the engine's modules: a pool of three cards from
the built-in catalogue, a policy that shares nvidia.com/gpu over example.com/vram, and pods
written as the dicts an AdmissionReview carries."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

from tests.support import pod_objects
from tests.support.pod_objects import deployment as deployment
from tests.support.pod_objects import pod as pod
from webhook.engine.findings import ShareIntent
from webhook.engine.pod_spec import Container, PodView
from webhook.engine.shares import SizedShare
from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS, PodTemplateLocation
from webhook.policy.catalogue import built_in_catalogue
from webhook.policy.model import (
    FractionHandling,
    GovernedResource,
    GpuModel,
    Placement,
    Policy,
    Sharing,
)

POD: PodTemplateLocation = POD_TEMPLATE_LOCATIONS["", "Pod"]
DEPLOYMENT: PodTemplateLocation = POD_TEMPLATE_LOCATIONS["apps", "Deployment"]

CATALOGUE = built_in_catalogue()
T4: GpuModel = CATALOGUE["Tesla-T4"]  # 15360 MiB
A100: GpuModel = CATALOGUE["NVIDIA-A100-SXM4-40GB"]  # 40960 MiB
H200: GpuModel = CATALOGUE["NVIDIA-H200"]  # 143771 MiB
MODEL_LABEL = "nvidia.com/gpu.product"
VRAM = "example.com/vram"
GPU = "nvidia.com/gpu"


def sharing(**changes: Any) -> Sharing:
    """Shares of nvidia.com/gpu as example.com/vram in MiB, on a T4 by default, with no env."""
    base = Sharing(
        vram_resource=VRAM,
        models={model.product: model for model in (T4, A100, H200)},
        default_model=T4.product,
    )
    return replace(base, **changes)


def policy(shared: Sharing | None = None, **changes: Any) -> Policy:
    """Policy "pool": nvidia.com/gpu shared (where `shared` is given), amd.com/gpu and the MIG
    family whole only."""
    base = Policy(
        name="pool",
        resources=(
            GovernedResource(GPU, FractionHandling.REWRITE),
            GovernedResource("amd.com/gpu"),
            GovernedResource("nvidia.com/mig-*"),
        ),
        sharing=shared,
        whole_gpu=Placement(),
    )
    return replace(base, **changes)


def container(
    name: str = "c",
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    return pod_objects.container(name, limits, requests, **fields)


def view(obj: dict[str, Any], location: PodTemplateLocation = POD) -> PodView:
    return pod_objects.view(obj, location)


def first_container(obj: dict[str, Any]) -> Container:
    return view(obj).containers[0]


def quarter_intent(written: str = "0.25", name: str = "c") -> ShareIntent:
    """nvidia.com/gpu written as a fraction in the limits of container `name`."""
    found = first_container(pod(container(name, {GPU: written})))
    return ShareIntent(found, "quantity", GPU, written, Fraction(written))


def vram_intent(units: int, source: Any = "vram", written: str | None = None) -> ShareIntent:
    text = str(units) if written is None else written
    found = first_container(pod(container("c", {VRAM: text})))
    return ShareIntent(found, source, VRAM, text, None, units)


def sized(mib: int, model: GpuModel = T4, name: str = "c", **fields: Any) -> SizedShare:
    """A share of `mib` MiB (MiB units) for container `name` of a pod with those fields."""
    found = first_container(pod(container(name, {VRAM: str(mib)}, **fields)))
    intent = ShareIntent(found, "vram", VRAM, str(mib), None, mib)
    return SizedShare(intent, model, mib, mib)
