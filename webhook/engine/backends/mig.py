"""The MIG backend (mixed strategy): a share is one MIG device, `nvidia.com/mig-<profile>: 1`,
of the smallest profile of the pod's model whose instances really hold it.

A profile's name is not its memory: an A100 40GB's `1g.5gb` has 4864 MiB, an H200's
`1g.18gb` 16384. The catalogue's `migProfiles` give what the instances have, so a share of
5 GiB on an A100 40GB gets `2g.10gb`, never `1g.5gb`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from webhook.engine.backends.rendering import ContainerRendering, Rendering, ShareBackend
from webhook.engine.findings import Violation
from webhook.engine.inventory import Advertised
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare
from webhook.policy.model import MIG_RESOURCE_PREFIX, GpuModel, MigProfile


def mig_resource(profile: MigProfile) -> str:
    """The device plugin's name for a profile: `1g.10gb+me` is advertised as `mig-1g.10gb.me`."""
    return MIG_RESOURCE_PREFIX + profile.name.replace("+", ".")


# `<slices>g.<memory>gb`, `+me` for the media extensions: what this backend gives. Other names
# a node may advertise (compute-instance profiles such as `1c.3g.20gb`) are not.
_PROFILE_NAME = re.compile(r"^([1-9][0-9]*)g\.[1-9][0-9]*gb(\+me)?$")


def _compute_slices(profile: MigProfile) -> int:
    found = _PROFILE_NAME.match(profile.name)
    return int(found.group(1)) if found else 0


def smallest_profile(share: SizedShare, profiles: Iterable[MigProfile]) -> MigProfile | None:
    """The profile with the least memory that holds the share, then the fewest compute
    slices; the media-extension (`+me`) profiles only where nothing else fits."""
    fitting = [profile for profile in profiles if profile.memory_mib >= share.mib]
    if not fitting:
        return None
    return min(fitting, key=lambda p: ("+" in p.name, p.memory_mib, _compute_slices(p), p.name))


def advertised_profiles(model: GpuModel, advertised: Advertised) -> tuple[MigProfile, ...]:
    """The profiles the nodes of `model` offer, with the memory the nodes give (else the
    catalogue's); one neither gives a size for cannot be chosen."""
    catalogue = {mig_resource(profile): profile for profile in model.mig_profiles}
    found: list[MigProfile] = []
    for resource, memory in sorted(advertised.items()):
        known = catalogue.get(resource)
        name = resource.removeprefix(MIG_RESOURCE_PREFIX).removesuffix(".me")
        name += "+me" if resource.endswith(".me") else ""
        if memory is not None and _PROFILE_NAME.match(name):
            found.append(MigProfile(name, memory))
        elif known is not None:
            found.append(known)
    return tuple(found)


@dataclass
class MigBackend(ShareBackend):
    """Chooses among the profiles the nodes of the pod's model advertise, where the server
    reads the nodes and has seen some; else among every profile of the catalogue."""

    # Each share's profile, chosen once for check() and render() (a backend lives one plan).
    _chosen: dict[int, MigProfile | None] = field(default_factory=dict, init=False, repr=False)

    def _offered(self, share: SizedShare) -> tuple[MigProfile, ...] | None:
        """The profiles the nodes of the share's model advertise, or None where none was
        seen (the catalogue's then)."""
        model = share.model
        seen = [self.inventory.advertised(name) for name in (model.product, *model.aliases)]
        found = [advertised for advertised in seen if advertised is not None]
        if not found:
            return None
        merged: dict[str, int | None] = {}
        for advertised in found:
            merged.update(advertised)
        return advertised_profiles(model, merged)

    def _profile(self, share: SizedShare) -> MigProfile | None:
        if id(share) not in self._chosen:
            offered = self._offered(share)
            profiles = share.model.mig_profiles if offered is None else offered
            self._chosen[id(share)] = smallest_profile(share, profiles)
        return self._chosen[id(share)]

    def seen_mib(self, share: SizedShare) -> int:
        """A process sees its MIG device: the profile's memory."""
        profile = self._profile(share)
        return profile.memory_mib if profile is not None else share.mib

    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        return [
            _no_profile(share, self._offered(share))
            for share in shares
            if self._profile(share) is None
        ]

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        containers: dict[str, ContainerRendering] = {}
        for share in shares:
            profile = self._profile(share)
            assert profile is not None, "check() refuses a share no profile holds"
            containers[share.intent.container.name] = ContainerRendering(
                {mig_resource(profile): "1"}
            )
        return Rendering(containers)


def _no_profile(share: SizedShare, offered: tuple[MigProfile, ...] | None) -> Violation:
    model = share.model
    where = f"{share.intent.container.label}: {share.intent.asked} ({share.mib} MiB)"
    elsewhere = smallest_profile(share, model.mig_profiles) if offered is not None else None
    if offered is not None and elsewhere is not None:
        listed = ", ".join(f"{p.name} ({p.memory_mib} MiB)" for p in offered) or "none known"
        return Violation(
            "no-mig-profile",
            f"{where}: no MIG profile that the nodes of {model.product} advertise holds it "
            f"({listed}; {elsewhere.name} would): ask for less, or have a node partitioned "
            "with a larger profile",
        )
    # Where the nodes offer no profile this backend can give, the catalogue's say what would.
    profiles = offered or model.mig_profiles
    if not profiles:
        return Violation(
            "no-mig-profile",
            f"{where}: the catalogue lists no MIG profiles for {model.product}: add its "
            "migProfiles to the policy, or select a model that has them",
        )
    listed = ", ".join(f"{p.name} ({p.memory_mib} MiB)" for p in profiles)
    return Violation(
        "no-mig-profile",
        f"{where}: no MIG profile of a {model.product} holds it ({listed}): ask for less, or "
        "for a whole GPU",
    )
