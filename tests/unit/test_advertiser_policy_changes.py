"""A policy reload while the advertiser works: a pass plans every node with the policies it began
with, and a node kept for other policies than those served is listed again, never planned. Either
mistake withdraws the VRAM of nodes whose pool label was not kept (dry runs: the patches are read
from what the advertiser writes)."""

from __future__ import annotations

import io
import json
import types
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from webhook.nodes.advertiser import Advertiser
from webhook.nodes.advertiser_metrics import AdvertiserMetrics
from webhook.policy.label_selectors import LabelSelector, ValueSet
from webhook.policy.model import GpuModel, NodePool, Sharing

VRAM = "example.com/vram"
CATALOGUE = MappingProxyType({"NVIDIA-A10G": GpuModel("NVIDIA-A10G", 23028)})


def pool_policy(label: str) -> Any:
    """A policy whose pool is the nodes labelled `label=yes`, advertising VRAM."""
    selector = LabelSelector.build([(label, ValueSet.of(["yes"]))])
    return types.SimpleNamespace(
        name=f"by-{label}", sharing=Sharing(VRAM, CATALOGUE, nodes=NodePool(selector))
    )


BY_POOL = (pool_policy("pool"),)
# The same resource, but a pool by a label the nodes were not kept with under BY_POOL.
BY_TEAM = (pool_policy("team"),)


def node(name: str, vram: str = "23028") -> dict[str, Any]:
    labels = {
        "pool": "yes",
        "team": "yes",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.memory": "23028",
        "nvidia.com/gpu.product": "NVIDIA-A10G",
    }
    status = {"capacity": {VRAM: vram}, "allocatable": {VRAM: vram}}
    return {"metadata": {"name": name, "labels": labels, "resourceVersion": "5"}, "status": status}


class Served:
    """The policy set being served, as the store's `current` is read."""

    def __init__(self) -> None:
        self.policies: Sequence[Any] = BY_POOL

    def __call__(self) -> Sequence[Any]:
        return self.policies


class ReloadOnFirstPatch(io.StringIO):
    """A dry run's output, where the first patch written is when a reload lands."""

    def __init__(self, served: Served) -> None:
        super().__init__()
        self.served = served

    def write(self, text: str) -> int:
        self.served.policies = BY_TEAM
        return super().write(text)

    def patches(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.getvalue().splitlines()]


def advertiser(served: Served, out: io.StringIO, relists: list[str]) -> Advertiser:
    found = Advertiser(
        None,  # type: ignore[arg-type]  # a dry run sends nothing
        served,
        metrics=AdvertiserMetrics(),
        dry_run=True,
        out=out,
    )
    found.watched_by(lambda: relists.append("relist"))
    return found


def test_a_pass_plans_every_node_with_the_policies_it_began_with() -> None:
    served = Served()
    out = ReloadOnFirstPatch(served)
    relists: list[str] = []
    advertiser_ = advertiser(served, out, relists)
    kept = [advertiser_.keep(node("n0", vram="1"))] + [
        advertiser_.keep(node(f"n{index}")) for index in range(1, 4)
    ]
    advertiser_.listed([found for found in kept if found is not None])
    (patch,) = out.patches()
    assert patch["node"] == "n0"
    assert {operation["op"] for operation in patch["patch"]} == {"test", "add"}
    # The reload that landed meanwhile is for the next pass: it lists the nodes again first.
    assert relists == []
    assert advertiser_.reconcile_all().relisting
    assert relists == ["relist"]
    assert len(out.patches()) == 1


def one_node_listed(served: Served, out: io.StringIO, relists: list[str]) -> Advertiser:
    """An advertiser that has listed node n0, in line with its policies."""
    found = advertiser(served, out, relists)
    first = found.keep(node("n0"))
    assert first is not None
    found.listed([first])
    return found


def test_a_node_kept_for_the_policies_before_a_reload_is_listed_again_not_planned() -> None:
    served, out = Served(), io.StringIO()
    relists: list[str] = []
    advertiser_ = one_node_listed(served, out, relists)
    event = advertiser_.keep(node("n0"))
    assert event is not None
    served.policies = BY_TEAM  # a reload lands between the keep and the event's turn
    advertiser_.changed("MODIFIED", event)
    assert out.getvalue() == ""
    assert relists == ["relist"]


def test_a_node_kept_for_the_policies_served_is_planned_at_its_event() -> None:
    served, out = Served(), io.StringIO()
    relists: list[str] = []
    advertiser_ = one_node_listed(served, out, relists)
    event = advertiser_.keep(node("n0", vram="0"))  # a kubelet that re-registered
    assert event is not None
    advertiser_.changed("MODIFIED", event)
    (patch,) = [json.loads(line) for line in out.getvalue().splitlines()]
    assert patch["node"] == "n0"
    assert relists == []
