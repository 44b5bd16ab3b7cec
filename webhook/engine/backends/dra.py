"""The DRA backend (Dynamic Resource Allocation, resource.k8s.io/v1): a share is a
ResourceClaim the pod makes from a ResourceClaimTemplate (dra_claims.py), named in
`spec.resourceClaims` and used by the container through `resources.claims`. No GPU resource
stays in the container: the claim is the share, and the scheduler allocates it.

What holds the share depends on the driver: NVIDIA's counts consumable memory in the scheduler
only (hardLimit None), HAMi's gives the container HAMi-core's limit from the claim's consumed
capacity (hardLimit HAMiCore). The template itself is made in the pod's namespace by the
server, before it answers (claim_templates.py), and by whoever applies `review`'s output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.engine.backends.dra_claims import claim_name, claim_template, request_mib
from webhook.engine.backends.rendering import (
    ClaimRendering,
    ContainerRendering,
    Rendering,
    ShareBackend,
    node_assigned,
)
from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare
from webhook.policy.model import DraSettings, HardLimit


class DraBackend(ShareBackend):
    @property
    def dra(self) -> DraSettings:
        assert self.sharing.dra is not None, "the loader gives the DRA backend its settings"
        return self.sharing.dra

    def check_pod(
        self, pod: PodView, shares: Sequence[ShareIntent], whole: Sequence[WholeGpu]
    ) -> list[Violation]:
        if not shares:
            return []
        # The scheduler allocates a pod's claims; a pod bound by name is never allocated one,
        # and the kubelet does not start it (KEP-4381, "Scheduling").
        consequence = "the kubelet does not start a pod whose claim nobody allocated"
        found = node_assigned(pod, "Dynamic Resource Allocation", consequence)
        for share in shares:
            share.container.claim_references()  # a list, or MalformedObject says which field
        ours = {entry.claim for entry in self.record.containers.values() if entry.claim}
        for share in shares:
            name = claim_name(share.container.name)
            if pod.claim_named(name) is not None and name not in ours:
                found.append(
                    Violation(
                        "claim-name-taken",
                        f"{share.container.label}: the pod already names a resource claim "
                        f'"{name}", which is the name of the claim its share is given by: '
                        "rename that claim",
                    )
                )
        return found

    def limit_mib(self, share: SizedShare) -> int | None:
        """HAMi-core holds the container to the memory its claim consumed: the share rounded up
        to the driver's step, where that differs from it."""
        if self.sharing.hard_limit is not HardLimit.HAMI_CORE:
            return None
        asked = request_mib(share, self.dra)
        return asked if asked != share.mib else None

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        containers: dict[str, ContainerRendering] = {}
        for share in shares:
            container = share.intent.container.name
            template_name, template = claim_template(share, self.dra)
            claim = ClaimRendering(claim_name(container), template_name, template)
            described = f"claim {claim.name} ({_described(share, self.dra, template)})"
            containers[container] = ContainerRendering({}, described, claim=claim)
        return Rendering(containers)


def _described(share: SizedShare, dra: DraSettings, template: Mapping[str, Any]) -> str:
    """What the claim asks, in one short phrase for the warning and the audit annotation: the
    alternatives the template kept (a MIG one no profile holds is left out)."""
    asked = f"{request_mib(share, dra)}Mi"
    if not dra.first_available:
        return f"{asked} of {dra.device_class_name}"
    request = template["spec"]["spec"]["devices"]["requests"][0]
    said = {"mig": "MIG", "share": asked, "whole": "whole"}
    kept = [said[alternative["name"]] for alternative in request["firstAvailable"]]
    return f"first of {', '.join(kept)}"
