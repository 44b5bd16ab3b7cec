"""The ExtendedResource backend: a share is an amount of the policy's VRAM resource, which
nodes advertise (`python -m webhook advertise`) and the default scheduler counts."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.engine.backends.rendering import ContainerRendering, Rendering, ShareBackend
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare


class ExtendedResourceBackend(ShareBackend):
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
