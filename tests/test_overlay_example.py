"""examples/overlay, a platform team's own policies installed over deploy/ (docs/own-policies.md):
its build is the base's build with only the policy ConfigMap's files changed, the pods mount that
ConfigMap under the name the base gave it, and the team's policies pass lint and their own suite."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kustomize import kustomize
from webhook.cli.main import main
from webhook.policy.loader import policy_files
from webhook.server.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[1]
OVERLAY = Path("examples/overlay")
TEAM_POLICIES = OVERLAY / "policies"
SHIPPED_POLICIES = REPO_ROOT / "policies"
SUITE = TEAM_POLICIES / "tests" / "gpu-test.yaml"
NAMESPACE = "gpu-admission"
WEBHOOK = "gpu-admission-webhook"
ADVERTISER = "gpu-vram-advertiser"
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")

Manifest = dict[str, Any]
Key = tuple[str, str, str, str]


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The paths as docs/own-policies.md writes them, relative to the repository root."""
    monkeypatch.chdir(REPO_ROOT)


def the_overlay() -> Manifest:
    kustomization: Manifest = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    return kustomization


def base_directory() -> Path:
    """The one base the overlay names: one of deploy/'s installing overlays, by relative path."""
    (resource,) = the_overlay()["resources"]
    base = (REPO_ROOT / OVERLAY / str(resource)).resolve()
    assert base.is_relative_to(REPO_ROOT / "deploy"), f"{resource} is not under deploy/"
    return base


def policy_generator() -> Manifest:
    (generator,) = the_overlay()["configMapGenerator"]
    assert isinstance(generator, dict)
    return generator


def key_of(manifest: Manifest) -> Key:
    metadata = manifest["metadata"]
    return manifest["apiVersion"], manifest["kind"], metadata.get("namespace", ""), metadata["name"]


@cache
def build(directory: Path) -> dict[Key, Manifest]:
    objects: dict[Key, Manifest] = {}
    for manifest in yaml.safe_load_all(kustomize(directory)):
        if not manifest:
            continue
        key = key_of(manifest)
        assert key not in objects, f"{directory} renders {key} twice"
        objects[key] = manifest
    return objects


def overlay_build() -> dict[Key, Manifest]:
    return build(REPO_ROOT / OVERLAY)


def base_build() -> dict[Key, Manifest]:
    return build(base_directory())


def deployment(objects: Mapping[Key, Manifest], name: str) -> Manifest:
    return objects["apps/v1", "Deployment", NAMESPACE, name]


def mounted_configmap(path: str, container: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> str:
    """The name of the ConfigMap that a container sees at path."""
    (mount,) = (m for m in container["volumeMounts"] if m["mountPath"] == path)
    assert "subPath" not in mount, "kubelet's ..data swap never reaches a subPath mount"
    (volume,) = (v for v in pod_spec["volumes"] if v["name"] == mount["name"])
    name: str = volume["configMap"]["name"]
    return name


def policy_configmaps(objects: Mapping[Key, Manifest]) -> dict[str, str]:
    """Deployment name to the ConfigMap it mounts where it reads its policies: the webhook at
    POLICY_DIR (read by its own settings), the advertiser at its --policies option."""
    server_spec = deployment(objects, WEBHOOK)["spec"]["template"]["spec"]
    (server,) = server_spec["containers"]
    settings = Settings.from_environ({v["name"]: v["value"] for v in server["env"] if "value" in v})
    advertiser_spec = deployment(objects, ADVERTISER)["spec"]["template"]["spec"]
    (advertiser,) = advertiser_spec["containers"]
    command: list[str] = advertiser["command"]
    advertiser_dir = command[command.index("--policies") + 1]
    return {
        WEBHOOK: mounted_configmap(str(settings.policy_dir), server, server_spec),
        ADVERTISER: mounted_configmap(advertiser_dir, advertiser, advertiser_spec),
    }


def the_policy_configmap(objects: Mapping[Key, Manifest]) -> Manifest:
    generator = policy_generator()
    (found,) = (
        m
        for m in objects.values()
        if m["kind"] == "ConfigMap"
        and m["metadata"]["namespace"] == generator["namespace"]
        and m["metadata"]["name"] in set(policy_configmaps(objects).values())
    )
    return found


def without_data(manifest: Manifest) -> Manifest:
    return {field: value for field, value in manifest.items() if field != "data"}


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdin=io.StringIO(""), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# --- the build ----------------------------------------------------------------------------


def test_the_generator_replaces_the_base_configmap_by_its_name() -> None:
    generator = policy_generator()
    assert generator["behavior"] == "replace"
    base_configmap = the_policy_configmap(base_build())
    assert (generator["namespace"], generator["name"]) == (
        base_configmap["metadata"]["namespace"],
        base_configmap["metadata"]["name"],
    )


def test_the_overlay_keeps_every_object_of_the_base_and_changes_only_the_policy_files() -> None:
    base, overlay = base_build(), overlay_build()
    assert sorted(overlay) == sorted(base)
    policy_key = key_of(the_policy_configmap(overlay))
    for key, manifest in overlay.items():
        if key == policy_key:
            assert without_data(manifest) == without_data(base[key])
        else:
            assert manifest == base[key], f"the overlay changes {key}"


def test_the_configmap_holds_exactly_the_team_policy_files() -> None:
    data = the_policy_configmap(overlay_build())["data"]
    team = {path.name: path.read_text() for path in policy_files(TEAM_POLICIES)}
    assert sorted(data) == sorted(team), (
        "the overlay's configMapGenerator must list exactly the policy files of its policies/"
    )
    for name, text in team.items():
        assert data[name] == text
    shipped = {path.name for path in policy_files(SHIPPED_POLICIES)}
    assert "default.yaml" in shipped and not shipped & set(data)


def test_both_deployments_mount_the_configmap_the_overlay_renders() -> None:
    overlay = overlay_build()
    rendered_name = the_policy_configmap(overlay)["metadata"]["name"]
    assert policy_configmaps(overlay) == {WEBHOOK: rendered_name, ADVERTISER: rendered_name}
    # The base's own name, with no content hash: an edit updates the mounted ConfigMap in place
    # and the live reload takes it, where a hashed name would roll both Deployments out.
    assert rendered_name == policy_generator()["name"]
    assert set(policy_configmaps(base_build()).values()) == {rendered_name}


# --- the team's policies offline ----------------------------------------------------------


def test_the_team_policies_lint_clean() -> None:
    code, out, err = cli("lint", str(TEAM_POLICIES))
    assert (code, err) == (0, ""), out + err
    assert out.strip() == f"{TEAM_POLICIES}/: 2 policies OK: a100-mig, h200-hami"


def test_the_team_suite_passes_every_case() -> None:
    cases = sum(len(suite["results"]) for suite in yaml.safe_load_all(SUITE.read_text()) if suite)
    code, out, err = cli("test", str(TEAM_POLICIES))
    assert code == 0, out + err
    summary = SUMMARY.fullmatch(out.splitlines()[-1])
    assert summary is not None, out
    assert (int(summary[1]), int(summary[2])) == (cases, 0)
    assert not [line for line in out.splitlines()[:-1] if not line.startswith("PASS ")], out
