"""The Gpushare backend (Aliyun's gpushare scheduler extender and device plugin): a share is
`aliyun.com/gpu-mem` in GiB, or MiB where the device plugin runs with `--memory-unit=MiB` (a
node setting the pod cannot show, so the policy's `unit` must match it). A pod already
written so reads as a share of that size.

The extender places a pod's memory on one card, and the device plugin hands it to one
container: a pod with shares in two containers is refused here rather than left pending."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.engine.backends.rendering import (
    DEFAULT_SCHEDULER,
    ContainerRendering,
    Rendering,
    ShareBackend,
    one_container,
    scheduler_conflict,
)
from webhook.engine.findings import Violation
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare
from webhook.policy.model import GPUSHARE_RESOURCE


class GpushareBackend(ShareBackend):
    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        # The extender is the default scheduler's: a pod another scheduler places gets no card.
        why = f'policy "{self.policy_name}" (gpushare\'s scheduler extender)'
        return [
            *one_container(shares, "gpushare", "its device plugin serves one container a pod"),
            *scheduler_conflict(pod, DEFAULT_SCHEDULER, why, self.record),
        ]

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        unit = self.sharing.unit
        return Rendering(
            {
                share.intent.container.name: ContainerRendering(
                    {GPUSHARE_RESOURCE: str(share.units)},
                    f"{GPUSHARE_RESOURCE}={share.units} {unit}",
                )
                for share in shares
            }
        )
