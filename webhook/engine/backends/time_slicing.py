"""The TimeSlicing backend (the NVIDIA device plugin's time-slicing or MPS, with
`renameByDefault`): a share is one replica of a card, `nvidia.com/gpu.shared: 1`.

A replica carries no size: under time-slicing nothing limits its memory, and under MPS the
daemon gives each replica the card's memory divided by the replicas. The size the pod asked
for reaches it through the policy's env (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, the frameworks'
memory fractions), which is what keeps it inside its share."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.engine.backends.rendering import ContainerRendering, Rendering, ShareBackend
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare


class TimeSlicingBackend(ShareBackend):
    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        resource = self.sharing.shared_resource
        return Rendering(
            {
                share.intent.container.name: ContainerRendering(
                    {resource: "1"}, f"{resource}=1 capped at {share.mib} MiB"
                )
                for share in shares
            }
        )
