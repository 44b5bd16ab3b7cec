"""mig.py, one table per function: the device plugin's name of a profile (`mig_resource`),
the profile a share gets (`smallest_profile`), the profiles the nodes offer
(`advertised_profiles`), and MigBackend's `seen_mib`, `check` and `render`, from the
catalogue or from what the nodes advertise. Catalogue sizes: an A100 40GB's 1g.5gb has
4864 MiB, 1g.10gb and 2g.10gb 9984, 3g.20gb and 4g.20gb 19968, 7g.40gb 40192."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from tests.unit.backends.pieces import (
    A100,
    H100,
    H200,
    T4,
    backend_of,
    example_sharing,
    in_view,
    of_memory,
    pod,
    sized,
    view,
)
from webhook.engine.backends.mig import advertised_profiles, mig_resource, smallest_profile
from webhook.engine.backends.rendering import ContainerRendering
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.shares import SizedShare
from webhook.policy.model import MigProfile

SHARING = example_sharing("mig")
MODELS = SHARING.models


def share(mib: int, product: str = A100) -> SizedShare:
    return sized(of_memory(in_view(view(pod())), SHARING, mib), SHARING, product)


def inventory(advertised: dict[str, dict[str, int | None]]) -> MigInventory:
    return MigInventory(MappingProxyType(advertised), version=1)


# mig_resource -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "resource"),
    [
        ("1g.5gb", "nvidia.com/mig-1g.5gb"),
        ("7g.141gb", "nvidia.com/mig-7g.141gb"),
        ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
        ("1g.18gb+me", "nvidia.com/mig-1g.18gb.me"),
    ],
    ids=[
        "a profile is advertised under its name",
        "a profile of an H200 too",
        "the media extensions are advertised as .me",
        "an H200's media-extension profile as .me too",
    ],
)
def test_mig_resource_is_the_device_plugins_name_for_a_profile(profile: str, resource: str) -> None:
    assert mig_resource(MigProfile(profile, 1)) == resource


# smallest_profile ---------------------------------------------------------------------------

ME_ONLY = (MigProfile("1g.9gb", 8192), MigProfile("1g.18gb+me", 16384))
ME_SMALLER = (MigProfile("1g.10gb+me", 9984), MigProfile("2g.20gb", 19968))
# Names that sort otherwise than their slices: "10g" before "3g".
SLICES = (MigProfile("10g.20gb", 19968), MigProfile("3g.20gb", 19968))


@pytest.mark.parametrize(
    ("mib", "product", "profiles", "chosen"),
    [
        (4096, A100, None, "1g.5gb"),
        (4864, A100, None, "1g.5gb"),
        (4865, A100, None, "1g.10gb"),
        (9985, A100, None, "3g.20gb"),
        (19969, A100, None, "7g.40gb"),
        (40192, A100, None, "7g.40gb"),
        (40193, A100, None, None),
        (16384, H200, None, "1g.18gb"),
        (16385, H200, None, "1g.35gb"),
        (10000, H100, None, "1g.20gb"),
        (10000, H200, ME_ONLY, "1g.18gb+me"),
        (5000, A100, ME_SMALLER, "2g.20gb"),
        (15000, A100, SLICES, "3g.20gb"),
        (4096, T4, None, None),
        (4096, A100, (), None),
    ],
    ids=[
        "4096 MiB fits the A100's 1g.5gb",
        "a share of exactly 1g.5gb's memory fits it",
        "one MiB more takes 1g.10gb, not 2g.10gb of the same memory",
        "past 9984 MiB 3g.20gb, the fewer slices of the two 20gb",
        "past 19968 MiB only the whole 7g.40gb",
        "7g.40gb holds 40192 MiB",
        "no profile of an A100 40GB holds 40193 MiB",
        "an H200's 1g.18gb over its media-extension twin of the same memory",
        "past 1g.18gb the H200's 1g.35gb, not 2g.35gb",
        "the H100's 1g.10gb has 9984 MiB, so 10000 takes 1g.20gb",
        "a media-extension profile where nothing else fits",
        "a larger profile before a smaller one with media extensions",
        "fewer slices, not the name, decide between profiles of one memory",
        "a T4 has no MIG profile",
        "no profile offered holds nothing",
    ],
)
def test_smallest_profile_prefers_less_memory_then_fewer_slices_then_no_media_extensions(
    mib: int, product: str, profiles: tuple[MigProfile, ...] | None, chosen: str | None
) -> None:
    model = MODELS[product]
    found = smallest_profile(
        share(mib, product), model.mig_profiles if profiles is None else profiles
    )
    assert (found.name if found else None) == chosen


# advertised_profiles ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("product", "advertised", "profiles"),
    [
        (A100, {}, ()),
        (A100, {"nvidia.com/mig-1g.5gb": None}, (MigProfile("1g.5gb", 4864),)),
        (A100, {"nvidia.com/mig-1g.5gb": 5120}, (MigProfile("1g.5gb", 5120),)),
        (A100, {"nvidia.com/mig-5g.30gb": 30000}, (MigProfile("5g.30gb", 30000),)),
        (A100, {"nvidia.com/mig-5g.30gb": None}, ()),
        (A100, {"nvidia.com/mig-1c.3g.20gb": 19968}, ()),
        (A100, {"nvidia.com/mig-1c.3g.20gb": None}, ()),
        (H200, {"nvidia.com/mig-1g.18gb.me": None}, (MigProfile("1g.18gb+me", 16384),)),
        (H200, {"nvidia.com/mig-1g.18gb.me": 16000}, (MigProfile("1g.18gb+me", 16000),)),
        (
            A100,
            {"nvidia.com/mig-3g.20gb": None, "nvidia.com/mig-1g.10gb": 9856},
            (MigProfile("1g.10gb", 9856), MigProfile("3g.20gb", 19968)),
        ),
    ],
    ids=[
        "nodes that advertise nothing offer nothing",
        "a profile without a memory label has the catalogue's",
        "a profile's memory label is taken over the catalogue's",
        "a profile the catalogue lacks is offered with its memory label",
        "a profile the catalogue lacks and no label sizes cannot be chosen",
        "a compute-instance profile is never offered, even with a label",
        "a compute-instance profile without a label is not offered either",
        "a media-extension resource is the +me profile of the catalogue",
        "a media-extension resource with its label",
        "profiles are offered in the order of their resource names",
    ],
)
def test_advertised_profiles_are_the_nodes_with_their_memory_else_the_catalogues(
    product: str, advertised: dict[str, int | None], profiles: tuple[MigProfile, ...]
) -> None:
    assert advertised_profiles(MODELS[product], advertised) == profiles


# seen_mib -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mib", "product", "nodes", "seen"),
    [
        (4096, A100, NO_INVENTORY, 4864),
        (10240, A100, NO_INVENTORY, 19968),
        (16384, H200, NO_INVENTORY, 16384),
        (4096, A100, inventory({A100: {"nvidia.com/mig-2g.10gb": 9856}}), 9856),
        (3840, T4, NO_INVENTORY, 3840),
    ],
    ids=[
        "a process of a 4096 MiB share sees the 1g.5gb device's 4864",
        "a process of a 10240 MiB share sees the 3g.20gb device's 19968",
        "a process of an H200's 1g.18gb sees 16384",
        "a process sees the memory the nodes label their device with",
        "a share no profile holds is seen as itself",
    ],
)
def test_mig_seen_mib_is_the_memory_of_the_profile_chosen(
    mib: int, product: str, nodes: MigInventory, seen: int
) -> None:
    assert backend_of(SHARING, inventory=nodes).seen_mib(share(mib, product)) == seen


# check --------------------------------------------------------------------------------------

A100_PROFILES = (
    "1g.5gb (4864 MiB), 1g.10gb (9984 MiB), 2g.10gb (9984 MiB), 3g.20gb (19968 MiB), "
    "4g.20gb (19968 MiB), 7g.40gb (40192 MiB)"
)


@pytest.mark.parametrize(
    ("mib", "product", "nodes", "message"),
    [
        (4096, A100, NO_INVENTORY, None),
        (
            40193,
            A100,
            NO_INVENTORY,
            'container "infer": example.com/vram=40193Mi (40193 MiB): no MIG profile of a '
            f"NVIDIA-A100-SXM4-40GB holds it ({A100_PROFILES}): ask for less, or for a whole GPU",
        ),
        (
            3840,
            T4,
            NO_INVENTORY,
            'container "infer": example.com/vram=3840Mi (3840 MiB): the catalogue lists no MIG '
            "profiles for Tesla-T4: add its migProfiles to the policy, or select a model that "
            "has them",
        ),
        (
            9000,
            A100,
            inventory({A100: {"nvidia.com/mig-1g.5gb": None}}),
            'container "infer": example.com/vram=9000Mi (9000 MiB): no MIG profile that the '
            "nodes of NVIDIA-A100-SXM4-40GB advertise holds it (1g.5gb (4864 MiB); 1g.10gb "
            "would): ask for less, or have a node partitioned with a larger profile",
        ),
        (
            4096,
            A100,
            inventory({A100: {"nvidia.com/mig-1c.3g.20gb": None}}),
            'container "infer": example.com/vram=4096Mi (4096 MiB): no MIG profile that the '
            "nodes of NVIDIA-A100-SXM4-40GB advertise holds it (none known; 1g.5gb would): ask "
            "for less, or have a node partitioned with a larger profile",
        ),
        (
            40193,
            A100,
            inventory({A100: {"nvidia.com/mig-7g.40gb": None}}),
            'container "infer": example.com/vram=40193Mi (40193 MiB): no MIG profile of a '
            "NVIDIA-A100-SXM4-40GB holds it (7g.40gb (40192 MiB)): ask for less, or for a "
            "whole GPU",
        ),
        (9000, A100, inventory({H100: {"nvidia.com/mig-1g.10gb": None}}), None),
        (
            40193,
            A100,
            inventory({A100: {"nvidia.com/mig-1c.3g.20gb": None}}),
            'container "infer": example.com/vram=40193Mi (40193 MiB): no MIG profile of a '
            f"NVIDIA-A100-SXM4-40GB holds it ({A100_PROFILES}): ask for less, or for a whole GPU",
        ),
    ],
    ids=[
        "a share a profile holds is given",
        "a share no profile of the catalogue holds lists them all",
        "a model without profiles in the catalogue is said so",
        "a share no advertised profile holds names the catalogue's that would",
        "nodes that offer only profiles no share takes offer none known",
        "a share neither the nodes nor the catalogue hold lists the nodes' profiles",
        "nodes of another model leave the catalogue to choose",
        "nodes offering no profile it gives, and a share no catalogue profile holds, list those",
    ],
)
def test_mig_check_refuses_a_share_no_profile_holds_and_says_where_to_look(
    mib: int, product: str, nodes: MigInventory, message: str | None
) -> None:
    pod_view = view(pod())
    found = backend_of(SHARING, inventory=nodes).check([share(mib, product)], pod_view)
    assert [v.rule for v in found] == ([] if message is None else ["no-mig-profile"])
    assert [v.message for v in found] == ([] if message is None else [message])


# render -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mib", "product", "nodes", "resource"),
    [
        (4096, A100, NO_INVENTORY, "nvidia.com/mig-1g.5gb"),
        (10240, A100, NO_INVENTORY, "nvidia.com/mig-3g.20gb"),
        (40000, H100, NO_INVENTORY, "nvidia.com/mig-3g.40gb"),
        (16384, H200, NO_INVENTORY, "nvidia.com/mig-1g.18gb"),
        (4096, A100, inventory({A100: {"nvidia.com/mig-2g.10gb": 9856}}), "nvidia.com/mig-2g.10gb"),
        (5000, A100, inventory({A100: {"nvidia.com/mig-1g.5gb": 5120}}), "nvidia.com/mig-1g.5gb"),
        (
            4096,
            A100,
            inventory({"NVIDIA-A100-SXM4-40GB-SHARED": {"nvidia.com/mig-3g.20gb": None}}),
            "nvidia.com/mig-3g.20gb",
        ),
        (
            10000,
            H200,
            inventory({H200: {"nvidia.com/mig-1g.18gb.me": None}}),
            "nvidia.com/mig-1g.18gb.me",
        ),
    ],
    ids=[
        "4096 MiB of an A100 40GB is one 1g.5gb device",
        "10240 MiB of an A100 40GB is one 3g.20gb device, 1g.10gb's 9984 being too small",
        "40000 MiB of an H100 is one 3g.40gb device of 40320",
        "16384 MiB of an H200 is one 1g.18gb device",
        "where the nodes offer only 2g.10gb it is chosen",
        "a node label larger than the catalogue's lets 1g.5gb hold 5000 MiB",
        "nodes labelled with a model's alias offer its profiles",
        "a media-extension device where the nodes offer only that",
    ],
)
def test_mig_render_gives_one_device_of_the_profile_chosen(
    mib: int, product: str, nodes: MigInventory, resource: str
) -> None:
    pod_view = view(pod())
    chosen = sized(of_memory(in_view(pod_view), SHARING, mib), SHARING, product)
    rendering = backend_of(SHARING, inventory=nodes).render([chosen], pod_view)
    assert rendering.containers == {"infer": ContainerRendering({resource: "1"})}
    assert rendering.containers["infer"].tolerated == (resource,)
    assert rendering.scheduler_name is None
    assert (rendering.annotations, rendering.default_labels) == ({}, {})


def test_mig_render_and_check_agree_on_the_profile_of_each_share() -> None:
    pod_view = view(pod())
    chosen = sized(of_memory(in_view(pod_view), SHARING, 9000), SHARING)
    mig = backend_of(SHARING)
    assert mig.check([chosen], pod_view) == []
    rendered = mig.render([chosen], pod_view).containers["infer"]
    assert rendered.resources == {"nvidia.com/mig-1g.10gb": "1"}
    assert mig.seen_mib(chosen) == 9984
