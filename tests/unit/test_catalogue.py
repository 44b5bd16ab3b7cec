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
        "    - {product: NVIDIA-H200, memoryMiB: 143771}\n"
    )
    write(
        tmp_path,
        catalogue=CATALOGUE.format(entries=entries),
        a=policy("a", models="[Tesla-T4]"),
        b=policy("b", default="NVIDIA-H200", models="[NVIDIA-H200, Tesla-T4]"),
    )
    policies = {p.name: p for p in load_policy_directory(tmp_path)}
    for name in ("a", "b"):
        sharing = policies[name].sharing
        assert sharing is not None
        assert sharing.models["Tesla-T4"].reserved_mib == 448
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
