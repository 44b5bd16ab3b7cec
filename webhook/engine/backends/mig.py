"""The MIG backend (mixed strategy): a share is one MIG device, `nvidia.com/mig-<profile>: 1`,
of the smallest profile of the pod's model whose instances really hold it.

A profile's name is not its memory: an A100 40GB's `1g.5gb` has 4864 MiB, an H200's
`1g.18gb` 16384. The catalogue's `migProfiles` give what the instances have, so a share of
5 GiB on an A100 40GB gets `2g.10gb`, never `1g.5gb`."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.engine.backends.rendering import ContainerRendering, Rendering, ShareBackend
from webhook.engine.findings import Violation
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare
from webhook.policy.model import MigProfile

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


def mig_resource(profile: MigProfile) -> str:
    """The device plugin's name for a profile: `1g.10gb+me` is advertised as `mig-1g.10gb.me`."""
    return MIG_RESOURCE_PREFIX + profile.name.replace("+", ".")


def _compute_slices(profile: MigProfile) -> int:
    return int(profile.name.split("g.", 1)[0])


def smallest_profile(
    share: SizedShare, advertised: frozenset[str] | None = None
) -> MigProfile | None:
    """The profile with the least memory that holds the share, then the fewest compute
    slices; the media-extension (`+me`) profiles only where nothing else fits. `advertised`:
    the MIG resources the nodes of the model offer, where the nodes were read."""
    fitting = [
        profile
        for profile in share.model.mig_profiles
        if profile.memory_mib >= share.mib
        and (advertised is None or mig_resource(profile) in advertised)
    ]
    if not fitting:
        return None
    return min(fitting, key=lambda p: ("+" in p.name, p.memory_mib, _compute_slices(p), p.name))


class MigBackend(ShareBackend):
    """Chooses among the profiles the nodes of the pod's model advertise, where the server
    reads the nodes and has seen some; else among every profile of the catalogue."""

    def _advertised(self, share: SizedShare) -> frozenset[str] | None:
        return self.inventory.advertised(share.model.product)

    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        return [
            _no_profile(share, self._advertised(share))
            for share in shares
            if smallest_profile(share, self._advertised(share)) is None
        ]

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        containers: dict[str, ContainerRendering] = {}
        for share in shares:
            profile = smallest_profile(share, self._advertised(share))
            assert profile is not None, "check() refuses a share no profile holds"
            containers[share.intent.container.name] = ContainerRendering(
                {mig_resource(profile): "1"}
            )
        return Rendering(containers)


def _no_profile(share: SizedShare, advertised: frozenset[str] | None) -> Violation:
    model = share.model
    where = f"{share.intent.container.label}: {share.intent.asked} ({share.mib} MiB)"
    elsewhere = smallest_profile(share) if advertised is not None else None
    if advertised is not None and elsewhere is not None:
        offered = [p for p in model.mig_profiles if mig_resource(p) in advertised]
        listed = ", ".join(f"{p.name} ({p.memory_mib} MiB)" for p in offered) or "none known"
        return Violation(
            "no-mig-profile",
            f"{where}: no MIG profile that the nodes of {model.product} advertise holds it "
            f"({listed}; {elsewhere.name} would): ask for less, or have a node partitioned "
            "with a larger profile",
        )
    if not model.mig_profiles:
        return Violation(
            "no-mig-profile",
            f"{where}: the catalogue lists no MIG profiles for {model.product}: add its "
            "migProfiles to the policy, or select a model that has them",
        )
    listed = ", ".join(f"{p.name} ({p.memory_mib} MiB)" for p in model.mig_profiles)
    return Violation(
        "no-mig-profile",
        f"{where}: no MIG profile of a {model.product} holds it ({listed}): ask for less, or "
        "for a whole GPU",
    )
