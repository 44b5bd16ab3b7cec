"""An env template merged into a `key:value` list (PYTORCH_CUDA_ALLOC_CONF): the webhook owns
one entry of it, and never clobbers the others or a value the user gave its key."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_objects import deployment, mutated, pod, record_of, spec_of
from tests.support.generated_pods import DEPLOYMENT, POD, POLICY
from webhook.engine.evaluate import evaluate_pod
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import EnvTemplate, Policy
from webhook.policy.problems import PolicyLoadError

CONF = "PYTORCH_CUDA_ALLOC_CONF"
assert POLICY.sharing is not None


def merging(enforce: bool = False) -> Policy:
    assert POLICY.sharing is not None
    template = EnvTemplate(
        CONF,
        "per_process_memory_fraction:{fraction}",
        enforce,
        merge_key="per_process_memory_fraction",
    )
    return replace(POLICY, sharing=replace(POLICY.sharing, env=(template,)))


def quarter(conf: str | None = None) -> dict[str, Any]:
    obj = pod({"nvidia.com/gpu": "0.25"})
    if conf is not None:
        obj["spec"]["containers"][0]["env"] = [{"name": CONF, "value": conf}]
    return obj


def conf_of(obj: dict[str, Any], location: Any = POD) -> str | None:
    env = spec_of(obj, location)["containers"][0].get("env", [])
    return next((item["value"] for item in env if item["name"] == CONF), None)


@pytest.mark.parametrize(
    ("written", "given"),
    [
        (None, "per_process_memory_fraction:0.25"),
        ("expandable_segments:True", "expandable_segments:True,per_process_memory_fraction:0.25"),
        ("", "per_process_memory_fraction:0.25"),
        # The user's own value for the key stays.
        ("per_process_memory_fraction:0.9,expandable_segments:True", None),
    ],
    ids=["absent", "merged beside the user's", "empty", "the user's value kept"],
)
def test_the_entry_is_merged_and_what_the_user_set_is_kept(
    written: str | None, given: str | None
) -> None:
    _, result = mutated(quarter(written), POD, merging())
    assert conf_of(result) == (given if given is not None else written)
    owned = record_of(result, POD)["containers"]["infer"]
    assert (CONF in owned["env"]) == (given is not None)


def test_an_enforced_entry_denies_a_user_value_for_its_key() -> None:
    outcome = evaluate_pod(quarter("per_process_memory_fraction:0.9"), POD, merging(True), "mutate")
    assert [v.rule for v in outcome.violations] == ["env-enforced"]
    validated = evaluate_pod(quarter("expandable_segments:True"), POD, merging(True), "validate")
    assert [v.rule for v in validated.violations] == ["not-rewritten", "env-enforced"]
    assert "lacks per_process_memory_fraction:0.25" in validated.violations[1].message


def test_a_resized_share_updates_only_its_entry() -> None:
    _, result = mutated(deployment(quarter("expandable_segments:True")), DEPLOYMENT, merging())
    edited = copy.deepcopy(result)
    limits = edited["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    limits["nvidia.com/gpu"] = "0.5"
    _, resized = mutated(edited, DEPLOYMENT, merging())
    assert (
        conf_of(resized, DEPLOYMENT) == "expandable_segments:True,per_process_memory_fraction:0.5"
    )


@pytest.mark.parametrize(
    ("written", "left"),
    [("expandable_segments:True", "expandable_segments:True"), (None, None)],
    ids=["the user's entries stay", "a list of ours alone goes"],
)
def test_a_whole_gpu_takes_away_only_the_webhooks_entry(
    written: str | None, left: str | None
) -> None:
    _, result = mutated(deployment(quarter(written)), DEPLOYMENT, merging())
    edited = copy.deepcopy(result)
    limits = edited["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    limits.clear()
    limits["nvidia.com/gpu"] = "1"
    _, whole = mutated(edited, DEPLOYMENT, merging())
    assert conf_of(whole, DEPLOYMENT) == left


@pytest.mark.parametrize(
    "value", ["per_process_memory_fraction", "a:1,b:2", ":{fraction}", "a:b:c"]
)
def test_a_merged_template_must_be_one_key_value_entry(tmp_path: Path, value: str) -> None:
    policy = (Path(__file__).resolve().parents[2] / "policies" / "default.yaml").read_text()
    env = f"""    env:
      - name: {CONF}
        value: "{value}"
        mergeInto: KeyValueList
"""
    end = policy.index("  # Pods that take whole GPUs")
    (tmp_path / "p.yaml").write_text(policy[:end] + env + "\n" + policy[end:])
    with pytest.raises(PolicyLoadError, match="one key:value entry"):
        load_policy_directory(tmp_path)
