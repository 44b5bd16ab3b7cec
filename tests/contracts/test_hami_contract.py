"""The HAMi backend against HAMi's own code (hami_source.py): each pod of the tables is
rewritten by examples/policies/hami (or its Percentage form), and what the webhook wrote is
given to HAMi's webhook, its request reading and its Fit as transcribed, and to HAMi-core's
memory report. HAMi must admit what the webhook admits and deny nothing it lets through,
give each card what the record says, and show the container the total its env's fractions
are of. docs/backends/hami.md carries these tables."""

from __future__ import annotations

import copy
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.contracts import hami_source as hami
from tests.support.engine_objects import mutated, pod, record_of
from tests.support.generated_pods import POD
from webhook.engine.evaluate import evaluate_pod
from webhook.policy.frameworks import FRAMEWORK_HEADROOM_MIB
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import Policy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policies" / "hami"
A100_MIB = 40960
MIB = 2**20


@cache
def policy(memory: str = "MiB", cores: bool = False) -> Policy:
    (example,) = load_policy_directory(EXAMPLE)
    assert example.sharing is not None
    settings = replace(example.sharing.hami, memory=memory, cores=cores)
    return replace(example, sharing=replace(example.sharing, hami=settings))


def env_of(obj: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in obj["spec"]["containers"][0].get("env", [])}


# (row, what the container asks for, the policy's hami.memory and cores, cards, MiB per card)
SHARES = [
    ("a quarter", {"nvidia.com/gpu": "0.25"}, "MiB", False, 1, 10240),
    ("4Gi, which HAMi would drop", {"example.com/vram": "4Gi"}, "MiB", False, 1, 4096),
    (
        "4Gi on each of 2 cards",
        {"nvidia.com/gpu": "2", "example.com/vram": "4Gi"},
        "MiB",
        False,
        2,
        4096,
    ),
    (
        "HAMi's own: 8000 on each of 2",
        {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "8000"},
        "MiB",
        False,
        2,
        8000,
    ),
    ("0.251 in whole percent", {"nvidia.com/gpu": "0.251"}, "Percentage", False, 1, 10240),
    ("a quarter, cores capped", {"nvidia.com/gpu": "0.25"}, "MiB", True, 1, 10240),
]


@pytest.mark.parametrize(
    ("row", "asked", "memory", "cores", "cards", "per_card"), SHARES, ids=[r[0] for r in SHARES]
)
def test_hami_gives_each_card_what_the_record_says(
    row: str, asked: dict[str, str], memory: str, cores: bool, cards: int, per_card: int
) -> None:
    _, result = mutated(pod(dict(asked)), POD, policy(memory, cores))
    admission = hami.webhook_handle(result)
    assert admission.allowed and admission.scheduler_name == hami.SCHEDULER
    container = result["spec"]["containers"][0]
    request = hami.generate_resource_requests(container)
    assert request.nums == cards
    assert hami.fit_memory_per_card(request, A100_MIB) == per_card
    entry = record_of(result, POD)["containers"]["infer"]
    assert (int(entry["mib"]), entry.get("cards", 1)) == (per_card, cards)
    # A share with no cores must not be made a card to itself by HAMi's webhook.
    assert not hami.default_exclusive_cores(container)
    assert request.coresreq == (per_card * 100 // A100_MIB if cores else 0)
    # HAMi-core shows the cap as the device's total: the frameworks' fraction is of it.
    seen = hami.cu_mem_get_info_total(per_card, A100_MIB)
    env = env_of(result)
    assert int(env["CUPY_GPU_MEMORY_LIMIT"]) == (per_card - FRAMEWORK_HEADROOM_MIB) * MIB
    taken = float(env["XLA_CLIENT_MEM_FRACTION"]) * seen
    assert per_card - FRAMEWORK_HEADROOM_MIB - 1 <= taken <= per_card - FRAMEWORK_HEADROOM_MIB


def _with(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj["spec"].update(spec)
    return obj


def _privileged(obj: dict[str, Any], index: int = 0) -> dict[str, Any]:
    obj["spec"]["containers"][index]["securityContext"] = {"privileged": True}
    return obj


def _sidecar(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["containers"].append({"name": "side", "image": "x"})
    return obj


def _privileged_init(obj: dict[str, Any]) -> dict[str, Any]:
    init = {"name": "setup", "image": "x", "securityContext": {"privileged": True}}
    obj["spec"]["initContainers"] = [init]
    return obj


# (row, the pod as written, the rules the webhook refuses it by, HAMi's message)
JUDGED = [
    (
        "a share that names its node",
        _with(pod({"nvidia.com/gpu": "0.25"}), nodeName="gpu-7"),
        ["node-assigned"],
        "pod has node assigned",
    ),
    (
        "whole GPUs that name their node",
        _with(pod({"nvidia.com/gpu": "1"}), nodeName="gpu-7"),
        ["node-assigned"],
        "pod has node assigned",
    ),
    (
        "a privileged sidecar beside a share",
        _privileged(_sidecar(pod({"nvidia.com/gpu": "0.25"})), 1),
        ["privileged-container"],
        "container side is privileged",
    ),
    (
        "a privileged container with whole GPUs",
        _privileged(pod({"nvidia.com/gpu": "2"})),
        ["privileged-container"],
        "container infer is privileged",
    ),
    (
        "a privileged init container beside a share",
        _privileged_init(pod({"nvidia.com/gpu": "0.25"})),
        ["privileged-container"],
        "container setup is privileged",
    ),
    (
        "HAMi's percentage form, privileged",
        _privileged(pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"})),
        ["privileged-container"],
        "container infer is privileged",
    ),
    (
        "no GPU but HAMi's count, naming its node",
        _with(pod({"nvidia.com/gpu": "0"}), nodeName="gpu-7"),
        ["node-assigned"],
        "pod has node assigned",
    ),
    ("a privileged pod without GPUs", _privileged(pod({"cpu": "1"})), [], ""),
    (
        "whole GPUs for another scheduler",
        _privileged(_with(pod({"nvidia.com/gpu": "1"}), schedulerName="volcano")),
        [],
        "",
    ),
]


@pytest.mark.parametrize(("row", "obj", "rules", "says"), JUDGED, ids=[r[0] for r in JUDGED])
def test_what_hamis_webhook_denies_is_refused_here_first(
    row: str, obj: dict[str, Any], rules: list[str], says: str
) -> None:
    outcome = evaluate_pod(copy.deepcopy(obj), POD, policy(), "mutate")
    assert [v.rule for v in outcome.violations] == rules
    admission = hami.webhook_handle(obj)
    assert admission.allowed is (not rules)
    assert admission.message.startswith(says) if rules else True


def test_apply_sending_the_webhooks_count_back_beside_the_memory_keeps_every_card() -> None:
    """kubectl apply sends the user's `gpu: 2` and `vram: 4Gi` again, with the `gpumem` the
    webhook wrote (not in last-applied) still there: still 4096 MiB on each of 2 cards."""
    _, result = mutated(pod({"nvidia.com/gpu": "2", "example.com/vram": "4Gi"}), POD, policy())
    again = copy.deepcopy(result)
    again["spec"]["containers"][0]["resources"]["limits"]["example.com/vram"] = "4Gi"
    _, reapplied = mutated(again, POD, policy())
    container = reapplied["spec"]["containers"][0]
    assert hami.generate_resource_requests(container).nums == 2
    assert "example.com/vram" not in container["resources"]["limits"]


def test_the_card_count_is_the_containers_whatever_the_record_says() -> None:
    _, result = mutated(pod({"nvidia.com/gpu": "2", "example.com/vram": "4Gi"}), POD, policy())
    edited = copy.deepcopy(result)
    annotations = edited["metadata"]["annotations"]
    key = "gpu-admission.example.com/shares"
    annotations[key] = annotations[key].replace('"cards":2', '"cards":3')
    assert '"cards":3' in annotations[key]
    outcome = evaluate_pod(edited, POD, policy(), "mutate")
    written = [op for op in outcome.operations if op["path"].endswith("nvidia.com~1gpu")]
    assert written == []
