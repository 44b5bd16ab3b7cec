"""The GPU model catalogue: built in, overridden by a GPUModelCatalogue document in the policy
directory, and named by the policies that share it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.engine_objects import mutated, pod
from tests.support.generated_pods import POD
from tests.support.policy_files import load_problems
from webhook.policy.catalogue import built_in_catalogue
from webhook.policy.loader import load_policy_directory

POLICY = """apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata:
  name: {name}
spec:
  match:
    namespaces: [{name}]
  gpuResources:
    - {{name: nvidia.com/gpu, fractions: Rewrite}}
  sharing:
    vramResource: example.com/vram
    defaultModel: {default}
{models}"""

CATALOGUE = """apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUModelCatalogue
metadata:
  name: ours
spec:
  models:
{entries}"""


def policy(name: str = "team", default: str = "Tesla-T4", models: str | None = None) -> str:
    listed = f"    models: {models}\n" if models is not None else ""
    return POLICY.format(name=name, default=default, models=listed)


def write(directory: Path, **files: str) -> Path:
    for name, text in files.items():
        (directory / f"{name}.yaml").write_text(text)
    return directory


def test_the_built_in_catalogue_holds_the_data_centre_cards_with_their_mig_profiles() -> None:
    catalogue = built_in_catalogue()
    a100 = catalogue["NVIDIA-A100-SXM4-40GB"]
    assert a100.memory_mib == 40960
    assert [p.name for p in a100.mig_profiles][:2] == ["1g.5gb", "1g.10gb"]
    assert catalogue["Tesla-T4-SHARED"] is catalogue["Tesla-T4"]


def test_a_policy_names_its_models_and_gets_them_from_the_catalogue(tmp_path: Path) -> None:
    write(tmp_path, team=policy(models="[Tesla-T4, NVIDIA-A100-SXM4-40GB]"))
    (loaded,) = load_policy_directory(tmp_path)
    assert loaded.sharing is not None
    products = {model.product for model in loaded.sharing.models.values()}
    assert products == {"Tesla-T4", "NVIDIA-A100-SXM4-40GB"}
    assert loaded.sharing.models["NVIDIA-A100-SXM4-40GB"].mig_profiles


def test_a_policy_that_names_no_model_takes_the_whole_catalogue(tmp_path: Path) -> None:
    write(tmp_path, team=policy())
    (loaded,) = load_policy_directory(tmp_path)
    assert loaded.sharing is not None
    assert set(loaded.sharing.models) == set(built_in_catalogue())


def test_the_directorys_catalogue_replaces_and_adds_models_for_every_policy(
    tmp_path: Path,
) -> None:
    entries = (
        "    - {product: Tesla-T4, memoryMiB: 15360, reservedMiB: 448}\n"
        "    - {product: Lab-Card-48G, memoryMiB: 49152}\n"
    )
    assert "Lab-Card-48G" not in built_in_catalogue()
    write(
        tmp_path,
        catalogue=CATALOGUE.format(entries=entries),
        a=policy("a", models="[Tesla-T4]"),
        b=policy("b", default="Lab-Card-48G", models="[Lab-Card-48G, Tesla-T4]"),
    )
    policies = {p.name: p for p in load_policy_directory(tmp_path)}
    for name in ("a", "b"):
        sharing = policies[name].sharing
        assert sharing is not None
        assert sharing.models["Tesla-T4"].reserved_mib == 448
    b_sharing = policies["b"].sharing
    assert b_sharing is not None
    assert b_sharing.models["Lab-Card-48G"].memory_mib == 49152
    # The share is sized from what the driver leaves: (15360 - 448) / 4.
    _, result = mutated(pod({"nvidia.com/gpu": "0.25"}), POD, policies["a"])
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"example.com/vram": "3728"}


def test_a_pod_on_a_time_sliced_node_label_is_measured_as_its_card(tmp_path: Path) -> None:
    write(tmp_path, team=policy(models="[Tesla-T4]"))
    (loaded,) = load_policy_directory(tmp_path)
    obj = pod({"nvidia.com/gpu": "0.5"})
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}
    _, result = mutated(obj, POD, loaded)
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"example.com/vram": "7680"}
    assert result["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}


@pytest.mark.parametrize(
    ("files", "where", "fragment"),
    [
        (
            {"team": policy(models="[Tesla-T4, NVIDIA-B300]")},
            "team.yaml:13: spec.sharing.models[1]",
            "'NVIDIA-B300' is not in the GPU model catalogue (Tesla-T4, ",
        ),
        (
            {"team": policy(models="[Tesla-T4, Tesla-T4]")},
            "team.yaml:13: spec.sharing.models[1]",
            "'Tesla-T4' is listed twice",
        ),
        (
            {
                "one": CATALOGUE.format(entries="    - {product: X-1, memoryMiB: 1024}\n"),
                "two": CATALOGUE.format(entries="    - {product: X-1, memoryMiB: 2048}\n"),
                "team": policy(),
            },
            "two.yaml:7: spec.models[0].product",
            "'X-1' is listed in ",
        ),
        (
            {
                "one": CATALOGUE.format(entries="    - {product: X-1, memoryMiB: many}\n"),
                "team": policy(),
            },
            "one.yaml:7: spec.models[0].memoryMiB",
            "must be of type integer, not string",
        ),
        (
            {"team": policy(models="[{product: X-1, memoryMiB: 1024, reservedMiB: 1024}]")},
            "team.yaml:13: spec.sharing.models[0].reservedMiB",
            "must be less than memoryMiB",
        ),
    ],
    ids=["unknown name", "named twice", "two catalogues", "catalogue schema", "headroom"],
)
def test_catalogue_problems_name_the_file_line_and_field(
    tmp_path: Path, files: dict[str, str], where: str, fragment: str
) -> None:
    write(tmp_path, **files)
    problems = load_problems(tmp_path)
    assert any(where in problem and fragment in problem for problem in problems), problems


# Cards added with their sources (docs/gpu-models.md): memoryMiB is what NVML reports as the
# card's total, which GPU feature discovery copies into nvidia.com/gpu.memory.
NEW_CARDS = [
    ("NVIDIA-H200", 143771),
    ("NVIDIA-H100-NVL", 95830),
    ("NVIDIA-B200", 183359),
    ("NVIDIA-GB200", 189471),
    ("NVIDIA-GH200-480GB", 97871),
    ("NVIDIA-H20", 97871),
    ("NVIDIA-L40", 46068),
    ("NVIDIA-A30", 24576),
    ("NVIDIA-A40", 46068),
    ("NVIDIA-RTX-6000-Ada-Generation", 46068),
]


@pytest.mark.parametrize(("product", "memory"), NEW_CARDS, ids=[row[0] for row in NEW_CARDS])
def test_each_added_card_is_built_in_with_its_memory_and_time_sliced_label(
    product: str, memory: int
) -> None:
    catalogue = built_in_catalogue()
    model = catalogue[product]
    assert (model.product, model.memory_mib, model.reserved_mib) == (product, memory, 0)
    assert model.aliases == (f"{product}-SHARED",)
    assert catalogue[f"{product}-SHARED"] is model


@pytest.mark.parametrize(("product", "memory"), NEW_CARDS, ids=[row[0] for row in NEW_CARDS])
def test_a_pod_pinned_to_an_added_card_gets_half_of_its_memory(
    tmp_path: Path, product: str, memory: int
) -> None:
    write(tmp_path, team=policy(models=f"[Tesla-T4, {product}]"))
    (loaded,) = load_policy_directory(tmp_path)
    obj = pod({"nvidia.com/gpu": "0.5"})
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": f"{product}-SHARED"}
    _, result = mutated(obj, POD, loaded)
    limits = result["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"example.com/vram": str(memory // 2)}


# GDDR6 cards report 49140 MiB with ECC off and 46068 with it on. A quarter sized on 49140
# (12285 MiB) would leave the fourth pod 3072 MiB short on a card with ECC on.
ECC_ON_MIB = 46068
ECC_CARDS = ["NVIDIA-L40", "NVIDIA-A40", "NVIDIA-RTX-6000-Ada-Generation", "NVIDIA-L40S"]


@pytest.mark.parametrize("product", ECC_CARDS)
def test_a_card_whose_memory_depends_on_ecc_is_sized_with_ecc_on(
    tmp_path: Path, product: str
) -> None:
    assert built_in_catalogue()[product].memory_mib == ECC_ON_MIB
    write(tmp_path, team=policy(default=product, models=f"[{product}]"))
    (loaded,) = load_policy_directory(tmp_path)
    _, result = mutated(pod({"nvidia.com/gpu": "0.25"}), POD, loaded)
    quarter = int(result["spec"]["containers"][0]["resources"]["limits"]["example.com/vram"])
    assert 4 * quarter <= ECC_ON_MIB


# The H200's profiles as measured on a real card (../shared/gpu-measurements/mig-profiles-h200.txt,
# NVML memorySizeMB, driver 580.159.04). The names overstate them: 1g.18gb is 16384 MiB.
H200_MEASURED = {
    "1g.18gb": 16384,
    "1g.18gb+me": 16384,
    "1g.35gb": 33280,
    "2g.35gb": 33280,
    "3g.71gb": 71424,
    "4g.71gb": 71424,
    "7g.141gb": 143360,
}


def test_the_h200_mig_profiles_are_the_measured_ones() -> None:
    profiles = built_in_catalogue()["NVIDIA-H200"].mig_profiles
    assert {p.name: p.memory_mib for p in profiles} == H200_MEASURED
    assert len(profiles) == len(H200_MEASURED)


# Profiles confirmed by a real GFD label or nvidia-smi listing of the MIG device, and the one
# place the catalogue keeps a smaller figure than the profile's memorySizeMB: the H100's
# 3g.40gb is labelled 40320 on driver 550 and 40448 on driver 580.
CONFIRMED_PROFILES = [
    ("NVIDIA-H100-80GB-HBM3", "3g.40gb", 40320),
    ("NVIDIA-H100-80GB-HBM3", "1g.10gb", 9984),
    ("NVIDIA-H100-NVL", "1g.12gb", 11008),
    ("NVIDIA-H100-NVL", "1g.24gb", 22144),
    ("NVIDIA-H20", "1g.12gb", 12032),
    ("NVIDIA-H20", "1g.24gb", 24192),
    ("NVIDIA-H20", "3g.48gb", 48512),
    ("NVIDIA-A30", "1g.6gb", 5952),
    ("NVIDIA-A30", "2g.12gb", 11968),
]


@pytest.mark.parametrize(
    ("product", "name", "memory"),
    CONFIRMED_PROFILES,
    ids=[f"{row[0]}-{row[1]}" for row in CONFIRMED_PROFILES],
)
def test_a_confirmed_mig_profile_has_the_memory_its_nodes_report(
    product: str, name: str, memory: int
) -> None:
    profiles = {p.name: p.memory_mib for p in built_in_catalogue()[product].mig_profiles}
    assert profiles[name] == memory


# Profiles whose instance size no real listing confirms are left out (docs/gpu-models.md).
UNCONFIRMED_PROFILES = [
    ("NVIDIA-A30", "4g.24gb"),
    ("NVIDIA-H100-NVL", "2g.24gb"),
    ("NVIDIA-H100-NVL", "7g.94gb"),
    ("NVIDIA-B200", "1g.23gb"),
    ("NVIDIA-GB200", "1g.24gb"),
]


@pytest.mark.parametrize(
    ("product", "name"),
    UNCONFIRMED_PROFILES,
    ids=[f"{row[0]}-{row[1]}" for row in UNCONFIRMED_PROFILES],
)
def test_an_unconfirmed_mig_profile_is_not_built_in(product: str, name: str) -> None:
    assert name not in {p.name for p in built_in_catalogue()[product].mig_profiles}


MIG_POLICY = """apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata:
  name: mig
spec:
  gpuResources:
    - {name: nvidia.com/gpu, fractions: Rewrite}
    - {name: nvidia.com/mig-*}
  sharing:
    backend: MIG
    vramResource: example.com/vram
    models: [NVIDIA-H200]
    defaultModel: NVIDIA-H200
"""


@pytest.mark.parametrize(
    ("asked", "device"),
    [
        ("16Gi", "nvidia.com/mig-1g.18gb"),
        # 17 GiB is less than "18gb" says, but more than the 16384 MiB a 1g.18gb has.
        ("17Gi", "nvidia.com/mig-1g.35gb"),
        ("32Gi", "nvidia.com/mig-1g.35gb"),
        # 33 GiB is more than a 1g.35gb or 2g.35gb instance holds (33280 MiB).
        ("33Gi", "nvidia.com/mig-3g.71gb"),
    ],
)
def test_an_h200_share_gets_the_smallest_measured_mig_device_that_holds_it(
    tmp_path: Path, asked: str, device: str
) -> None:
    write(tmp_path, mig=MIG_POLICY)
    (loaded,) = load_policy_directory(tmp_path)
    _, result = mutated(pod({"example.com/vram": asked}), POD, loaded)
    assert result["spec"]["containers"][0]["resources"]["limits"] == {device: "1"}
