"""The ExtendedResource backend: a share is an amount of the policy's VRAM resource, which
nodes advertise (`python -m webhook advertise`) and the default scheduler counts. On one-card
nodes (`multiGPU: Skip`) every share of a pod is on that card, so their sum must fit it."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.engine.backends.rendering import ContainerRendering, Rendering, ShareBackend
from webhook.engine.findings import Violation
from webhook.engine.one_card import over_one_card
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare
from webhook.policy.model import MultiGpuNodes


class ExtendedResourceBackend(ShareBackend):
    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        if self.sharing.nodes.multi_gpu is not MultiGpuNodes.SKIP:
            return []
        over = over_one_card(shares)
        return [] if over is None else [over]

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        return Rendering(
            {
                share.intent.container.name: ContainerRendering(
                    {self.sharing.vram_resource: str(share.units)},
                    f"{self.sharing.vram_resource}={share.units} {self.sharing.unit}",
                )
                for share in shares
            }
        )
