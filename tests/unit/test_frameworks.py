"""Frameworks told their share inside it, the hard limit each pool states, and what a pool
without one says wherever a user looks."""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine_objects import mutated, pod, record_of, spec_of
from tests.support.generated_pods import POD
from tests.support.policy_files import load_problems, write_policy
from webhook.cli.lint import run_lint
from webhook.engine.evaluate import evaluate_pod
from webhook.engine.render import unenforced_warning
from webhook.engine.shares import SizedShare, placeholder_values
from webhook.policy.frameworks import FRAMEWORK_HEADROOM_MIB
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import HardLimit, Policy

MIB = 2**20
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "policies"
HEADER = """apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata:
  name: pool
spec:
  gpuResources:
    - name: nvidia.com/gpu
      fractions: Rewrite
  sharing:
    vramResource: example.com/vram
    models: [Tesla-T4, NVIDIA-H100-80GB-HBM3, NVIDIA-H200]
    defaultModel: Tesla-T4
"""


def policy_with(tmp_path: Path, sharing: str = "") -> Policy:
    write_policy(tmp_path, HEADER + sharing)
    (policy,) = load_policy_directory(tmp_path)
    return policy


def env_of(obj: dict[str, Any]) -> dict[str, str]:
    container = spec_of(obj, POD)["containers"][0]
    return {item["name"]: item["value"] for item in container.get("env", [])}


def on_model(limits: dict[str, str], model: str, env: list[dict[str, str]] | None = None) -> Any:
    obj = pod(limits)
    obj["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": model}
    if env is not None:
        obj["spec"]["containers"][0]["env"] = env
    return obj


# --- what a policy states -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("example", "hard_limit"),
    [
        ("extended-resource", HardLimit.MPS),  # stated: its nodes run an MPS daemon
        ("time-slicing", HardLimit.NONE),
        ("gpushare", HardLimit.NONE),
        ("kai", HardLimit.NONE),
        ("hami", HardLimit.HAMI_CORE),
        ("mig", HardLimit.MIG),
    ],
)
def test_each_backend_has_its_own_hard_limit_unless_the_policy_states_one(
    example: str, hard_limit: HardLimit
) -> None:
    (policy,) = load_policy_directory(EXAMPLES / example)
    assert policy.sharing is not None
    assert policy.sharing.hard_limit is hard_limit
    assert policy.sharing.enforced is (hard_limit is not HardLimit.NONE)


@pytest.mark.parametrize(
    ("sharing", "fragment"),
    [
        pytest.param(
            "    backend: HAMi\n    hardLimit: MPS\n",
            "a HAMi pool's hard limit is HAMiCore, not MPS",
            id="HAMi has HAMi-core only",
        ),
        pytest.param(
            "    hardLimit: MIG\n",
            "a ExtendedResource pool's hard limit is None or MPS, not MIG",
            id="no MIG slice without the MIG backend",
        ),
        pytest.param(
            "    frameworks: [JAX, JAX]\n", "'JAX' is listed twice", id="a framework twice"
        ),
        pytest.param(
            "    frameworks: [JAX]\n    env:\n"
            "      - {name: XLA_CLIENT_MEM_FRACTION, value: '1'}\n",
            "XLA_CLIENT_MEM_FRACTION is given because frameworks lists JAX: leave it out of env",
            id="a framework's variable in env",
        ),
        pytest.param(
            "    hardLimit: MPS\n    env:\n"
            "      - {name: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, value: '0={mib}M'}\n",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT is given because hardLimit is MPS",
            id="the hard limit's variable in env",
        ),
    ],
)
def test_what_a_pool_cannot_hold_is_refused_with_the_field(
    tmp_path: Path, sharing: str, fragment: str
) -> None:
    write_policy(tmp_path, HEADER + sharing)
    problems = "\n".join(load_problems(tmp_path))
    assert fragment in problems


# --- the limits frameworks are given --------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "asked", "seen"),
    [
        pytest.param("NVIDIA-H200", "0.25", 143771, id="a quarter of an H200"),
        pytest.param("Tesla-T4", "0.25", 15360, id="a quarter of a T4"),
        pytest.param("NVIDIA-H100-80GB-HBM3", "0.333", 81559, id="a third of an H100"),
    ],
)
def test_every_framework_limit_sits_inside_the_share_with_room_for_the_context(
    tmp_path: Path, model: str, asked: str, seen: int
) -> None:
    policy = policy_with(tmp_path, "    frameworks: [JAX, PyTorch, CuPy, TensorFlow]\n")
    _, result = mutated(on_model({"nvidia.com/gpu": asked}, model), POD, policy)
    env = env_of(result)
    share_mib = int(
        spec_of(result, POD)["containers"][0]["resources"]["limits"]["example.com/vram"]
    )
    room = share_mib - FRAMEWORK_HEADROOM_MIB
    fraction = Fraction(env["XLA_CLIENT_MEM_FRACTION"])
    assert fraction * seen <= room
    expected = f"per_process_memory_fraction:{env['XLA_CLIENT_MEM_FRACTION']}"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == expected
    assert int(env["CUPY_GPU_MEMORY_LIMIT"]) == room * MIB
    assert env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"


def test_the_offline_review_of_a_quarter_h200_leaves_512_mib_of_its_35942() -> None:
    """0.25 of an H200 in the example pool whose nodes run an MPS daemon."""
    (policy,) = load_policy_directory(EXAMPLES / "extended-resource")
    _, result = mutated(on_model({"nvidia.com/gpu": "0.25"}, "NVIDIA-H200"), POD, policy)
    env = env_of(result)
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=35942M"
    assert env["CUPY_GPU_MEMORY_LIMIT"] == str((35942 - 512) * MIB)
    # 0.2464 of the 143771 MiB NVML reports is 35425 MiB; CUDA reports less (143155), so JAX
    # and PyTorch take 35273 MiB at most: under the limit with the context's room.
    assert env["XLA_CLIENT_MEM_FRACTION"] == "0.2464"


@pytest.mark.parametrize(
    ("mib", "card", "text"),
    [
        pytest.param(35942, 143771, "0.2464", id="four decimals, rounded down"),
        pytest.param(519, 81559, "0.00008", id="a tiny share: more decimals, never 0.0001"),
        pytest.param(1024, 1024, "0.5", id="the whole seen device"),
    ],
)
def test_a_framework_fraction_never_rounds_up_past_the_share(
    tmp_path: Path, mib: int, card: int, text: str
) -> None:
    policy = policy_with(tmp_path)
    assert policy.sharing is not None
    model = policy.sharing.models["Tesla-T4"]
    share = SizedShare(intent=None, model=model, units=mib, mib=mib)  # type: ignore[arg-type]
    values = placeholder_values(share, policy.sharing, card)
    assert values["frameworkFraction"] == text
    assert Fraction(text) * card <= mib - FRAMEWORK_HEADROOM_MIB


def test_a_share_with_no_room_beside_the_context_is_refused(tmp_path: Path) -> None:
    policy = policy_with(tmp_path)
    outcome = evaluate_pod(pod({"example.com/vram": "512"}), POD, policy, "mutate")
    (violation,) = outcome.violations
    assert violation.rule == "share-below-headroom"
    assert "a CUDA process needs 512 MiB of room" in violation.message


@pytest.mark.parametrize(
    ("env", "where"),
    [
        pytest.param(None, "PYTORCH_CUDA_ALLOC_CONF", id="neither set: the name every torch reads"),
        pytest.param(
            [{"name": "PYTORCH_ALLOC_CONF", "value": "expandable_segments:True"}],
            "PYTORCH_ALLOC_CONF",
            id="the newer name alone: merged there, not shadowed",
        ),
        pytest.param(
            [
                {"name": "PYTORCH_ALLOC_CONF", "value": "expandable_segments:True"},
                {"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "garbage_collection_threshold:0.8"},
            ],
            "PYTORCH_CUDA_ALLOC_CONF",
            id="both set: the one torch reads",
        ),
    ],
)
def test_pytorchs_fraction_goes_to_the_variable_torch_reads(
    tmp_path: Path, env: list[dict[str, str]] | None, where: str
) -> None:
    policy = policy_with(tmp_path, "    frameworks: [PyTorch]\n")
    _, result = mutated(on_model({"nvidia.com/gpu": "0.25"}, "Tesla-T4", env), POD, policy)
    given = env_of(result)
    assert "per_process_memory_fraction:0.2166" in given[where].split(",")
    others = {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"} - {where}
    assert all("per_process_memory_fraction" not in given.get(name, "") for name in others)


def test_variables_the_policy_gives_no_more_leave_the_pod_on_its_next_pass(
    tmp_path: Path,
) -> None:
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    before = policy_with(tmp_path / "before", "    hardLimit: MPS\n")
    after = policy_with(tmp_path / "after", "    hardLimit: None\n")
    _, stored = mutated(pod({"nvidia.com/gpu": "0.25"}), POD, before)
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" in env_of(stored)
    _, moved = mutated(stored, POD, after)
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in env_of(moved)
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env_of(moved)
    assert record_of(moved, POD)["hardLimit"] == "None"


# --- a pool without a hard limit says so ------------------------------------------------------


def test_a_share_in_a_pool_without_a_hard_limit_is_named_unenforced(tmp_path: Path) -> None:
    policy = policy_with(tmp_path, "    frameworks: [JAX, PyTorch, TensorFlow]\n")
    outcome, result = mutated(pod({"nvidia.com/gpu": "0.25"}), POD, policy)
    assert policy.sharing is not None
    assert unenforced_warning(policy.sharing) in outcome.warnings
    assert unenforced_warning(policy.sharing) == (
        "GPU memory shares are not enforced on these nodes: only JAX, PyTorch are told their limit"
    )
    assert record_of(result, POD)["hardLimit"] == "None"
    out = io.StringIO()
    assert run_lint(tmp_path, stdout=out) == 0
    assert 'notice: policy "pool" does not enforce its shares (hardLimit: None)' in out.getvalue()
    assert "JAX, PyTorch are told their limit, CuPy, TensorFlow are not" in out.getvalue()


def test_a_share_held_by_mps_is_not_warned_about(tmp_path: Path) -> None:
    policy = policy_with(tmp_path, "    hardLimit: MPS\n")
    outcome, result = mutated(pod({"nvidia.com/gpu": "0.25"}), POD, policy)
    assert not any("not enforced" in warning for warning in outcome.warnings)
    assert record_of(result, POD)["hardLimit"] == "MPS"
    assert env_of(result)["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=3840M"
    out = io.StringIO()
    run_lint(tmp_path, stdout=out)
    assert "notice" not in out.getvalue()
    assert env_of(result)["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"


def test_a_variable_a_framework_defers_to_is_never_taken_away_as_stale(tmp_path: Path) -> None:
    """Found by the fuzzer: a record that claims the older JAX variable must not make the
    webhook remove it, or the next pass adds the newer one and JAX refuses both."""
    policy = policy_with(tmp_path)
    record = (
        '{"model":"Tesla-T4","pinned":false,"containers":{"infer":{"asked":"nvidia.com/gpu=250m",'
        '"vram":"3840","env":["XLA_PYTHON_CLIENT_MEM_FRACTION"]}}}'
    )
    obj = pod(
        {"nvidia.com/gpu": "250m"},
        annotations={"gpu-admission.example.com/shares": record},
    )
    older = {"name": "XLA_PYTHON_CLIENT_MEM_FRACTION", "value": "0.2"}
    obj["spec"]["containers"][0]["env"] = [older]
    _, result = mutated(obj, POD, policy)  # a second pass changes nothing
    env = env_of(result)
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.2"
    assert "XLA_CLIENT_MEM_FRACTION" not in env
