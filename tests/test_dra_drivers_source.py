"""The DRA oracle (tests/contracts/dra_drivers_source.py) against the drivers' own specs and
unit tests: the demo GpuConfigs, the webhook and consumable-shares Go tables of
kubernetes-sigs/dra-driver-nvidia-gpu @ 95932046, the allocator's consumable-capacity tests of
kubernetes/dynamic-resource-allocation v0.36.0, and the HAMi demo claims of
Project-HAMi/k8s-dra-driver v0.1.0. Each case names the file and lines it comes from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.contracts import dra_drivers_source as dra

GI = 2**30
MI = dra.MIB
TS = "TimeSlicingSettings"
MPS = "MPSSupport"
SHARED = Path("/work/shared/sharing-dialects/dra")


def gpu_config(sharing: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"apiVersion": dra.NVIDIA_API_VERSION, "kind": "GpuConfig"}
    if sharing is not None:
        config["sharing"] = sharing
    return {**config, **extra}


# demo/specs/quickstart/v1/gpu-test-mps.yaml (shared: nvidia-mps-gpuconfig.yaml)
MPS_DEMO = gpu_config(
    {
        "strategy": "MPS",
        "mpsConfig": {
            "defaultActiveThreadPercentage": 50,
            "defaultPinnedDeviceMemoryLimit": "10Gi",
        },
    }
)
# tests/bats/specs/gpu-timeslicing.yaml (shared: nvidia-timeslicing-gpuconfig.yaml)
TS_DEMO = gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}})


def refusal(config: dict[str, Any], *gates: str, shares: bool = False) -> str | None:
    return dra.nvidia_gpu_config_refusal(config, consumable_shares=shares, gates=frozenset(gates))


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared reference data not mounted")
@pytest.mark.parametrize(
    ("name", "expected"),
    [("nvidia-mps-gpuconfig.yaml", MPS_DEMO), ("nvidia-timeslicing-gpuconfig.yaml", TS_DEMO)],
)
def test_the_inline_demo_configs_are_the_reference_files_configs(name: str, expected: dict) -> None:
    documents = list(yaml.safe_load_all((SHARED / name).read_text()))
    templates = [d for d in documents if d and d["kind"] == "ResourceClaimTemplate"]
    assert templates[0]["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"] == expected


@pytest.mark.parametrize(("config", "gate"), [(MPS_DEMO, MPS), (TS_DEMO, TS)])
def test_the_demo_gpu_configs_are_accepted_with_their_gate_on(config: dict, gate: str) -> None:
    assert refusal(config, gate) is None


# cmd/webhook/main_test.go L328-366: the same Validate text, at prepare wrapped by
# device_state.go L881-883.
@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            MPS_DEMO,
            '"MPS" is selected as the GPU sharing strategy, but the "MPSSupport" feature gate '
            "is not enabled",
        ),
        (
            TS_DEMO,
            '"TimeSlicing" is selected as the GPU sharing strategy, but the '
            '"TimeSlicingSettings" feature gate is not enabled',
        ),
    ],
)
def test_the_demo_gpu_configs_are_refused_with_their_gate_off(config: dict, message: str) -> None:
    assert refusal(config) == f"error validating GPU config: {message}"


def test_mps_is_refused_at_prepare_when_consumable_shares_are_on() -> None:
    # device_state.go L1200-1202; device_state_test.go L153-171; bats
    # test_gpu_consumable_shares.bats L81-90 ("MPS request fails when consumable shares enabled")
    assert refusal(MPS_DEMO, MPS, shares=True) == (
        "error applying config: MPS sharing is not supported when consumable shares is enabled"
    )
    assert refusal(gpu_config({"strategy": "MPS"}), MPS, shares=True) is not None


@pytest.mark.parametrize(
    "config",
    [
        TS_DEMO,
        gpu_config({"strategy": "TimeSlicing"}),
        gpu_config(),
        {"apiVersion": dra.NVIDIA_API_VERSION, "kind": "MigDeviceConfig"},
    ],
    ids=["timeslicing", "timeslicing-defaulted", "no-sharing", "mig-config-skipped"],
)
def test_time_slicing_and_no_sharing_are_accepted_under_consumable_shares(config: dict) -> None:
    assert refusal(config, TS, shares=True) is None


# cmd/webhook/main_test.go L89-117, L226-245: Validate's own messages.
@pytest.mark.parametrize(
    ("sharing", "message"),
    [
        (
            {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Invalid Interval"}},
            "unknown time-slice interval: Invalid Interval, supported time-slice intervals: "
            "Default, Short, Medium, Long",
        ),
        (
            {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": -1}},
            "active thread percentage must not be negative",
        ),
        (
            {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 101}},
            "active thread percentage must not be greater than 100",
        ),
        (
            {"strategy": "Fractional"},
            "unknown GPU sharing strategy: Fractional, supported GPU sharing strategies: "
            "TimeSlicing, MPS",
        ),
    ],
)
def test_validate_refuses_what_the_driver_webhook_table_refuses(
    sharing: dict, message: str
) -> None:
    assert refusal(gpu_config(sharing), TS, MPS) == f"error validating GPU config: {message}"


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        (
            gpu_config(TS_DEMO["sharing"], replicas=2),
            'strict decoding error: unknown field "replicas"',
        ),
        (
            gpu_config({"strategy": "MPS", "mpsConfig": {"memoryLimit": "4Gi"}}),
            'unknown field "sharing.mpsConfig.memoryLimit"',
        ),
        (gpu_config() | {"Sharing": {"strategy": "MPS"}}, 'unknown field "Sharing"'),
        ({"kind": "GpuConfig"}, "Object 'apiVersion' is missing"),
        ({"apiVersion": dra.NVIDIA_API_VERSION}, "Object 'Kind' is missing"),
        (
            gpu_config() | {"apiVersion": "resource.nvidia.com/v1"},
            'no kind "GpuConfig" is registered for version "resource.nvidia.com/v1"',
        ),
        (
            gpu_config({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": "50"}}),
            "cannot unmarshal string into Go struct field "
            "MpsConfig.sharing.mpsConfig.defaultActiveThreadPercentage of type int",
        ),
    ],
)
def test_the_strict_decoder_refuses_unknown_fields_and_kinds(config: dict, fragment: str) -> None:
    refused = refusal(config, TS, MPS)
    assert refused is not None
    assert refused.startswith("error getting opaque device configs: error decoding config")
    assert fragment in refused


def test_the_other_strategys_block_is_refused_only_when_the_config_is_applied() -> None:
    # validate.go L86-97 does not look at it; api sharing.go L134-136, L153-155 do, called from
    # device_state.go L1177-1180 and L1209-1212.
    both = {"interval": "Short"}, {"defaultActiveThreadPercentage": 50}
    timeslicing = gpu_config(
        {"strategy": "TimeSlicing", "timeSlicingConfig": both[0], "mpsConfig": both[1]}
    )
    mps = gpu_config({"strategy": "MPS", "timeSlicingConfig": both[0], "mpsConfig": both[1]})
    assert "cannot use MpsConfig with the 'TimeSlicing' strategy" in str(refusal(timeslicing, TS))
    assert "cannot use TimeSlicingConfig with the 'MPS' strategy" in str(refusal(mps, MPS))
    assert "consumable shares" in str(refusal(mps, MPS, shares=True))


def test_a_time_slicing_block_without_an_interval_crashes_the_plugin() -> None:
    # gpuconfig.go L50-56 fills only a nil block; validate.go L68-70 dereferences the nil interval.
    empty = gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {}})
    assert str(refusal(empty, TS)).startswith("panic: runtime error")


# api/nvidia.com/resource/v1beta1/sharing_test.go L28-150 (one device, "UUID0" = index 0).
@pytest.mark.parametrize(
    ("mps_config", "fragment"),
    [
        ({"defaultPinnedDeviceMemoryLimit": "2Gi"}, None),
        ({"defaultPinnedDeviceMemoryLimit": "1M"}, "invalid limit: default value set too low"),
        ({"defaultPerDevicePinnedMemoryLimit": {"0": "1M"}}, "invalid limit: value set too low"),
        (
            {
                "defaultPinnedDeviceMemoryLimit": "2Gi",
                "defaultPerDevicePinnedMemoryLimit": {"0": "1Gi"},
            },
            None,
        ),
        ({"defaultPerDevicePinnedMemoryLimit": {"1": "1Gi"}}, "invalid device index: 1"),
        ({"defaultPinnedDeviceMemoryLimit": "1Mi"}, None),
    ],
)
def test_mps_pinned_memory_limits_follow_the_driver_table(
    mps_config: dict, fragment: str | None
) -> None:
    refused = refusal(gpu_config({"strategy": "MPS", "mpsConfig": mps_config}), MPS)
    if fragment is None:
        assert refused is None
    else:
        assert refused is not None and "error starting MPS control daemon" in refused
        assert fragment in refused


def test_a_gate_set_the_plugin_refuses_to_start_with_raises() -> None:
    # featuregates.go L266-268
    with pytest.raises(ValueError, match="mutually exclusive with MPSSupport"):
        refusal(MPS_DEMO, MPS, "DynamicMIG")


@pytest.mark.parametrize(
    ("existing", "incoming", "conflict"),
    [
        (None, None, False),
        (None, TS_DEMO, True),
        (TS_DEMO, TS_DEMO, False),
        (
            gpu_config({"strategy": "TimeSlicing"}),
            gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}),
            False,
        ),
        (TS_DEMO, gpu_config({"strategy": "TimeSlicing"}), True),
        (gpu_config(), None, False),
    ],
)
def test_claims_sharing_a_gpu_need_the_same_normalized_config(
    existing: dict | None, incoming: dict | None, conflict: bool
) -> None:
    # device_state.go L1508-1523; device_state_test.go L77-82 (matching configs allowed).
    found = dra.nvidia_shared_device_conflict(existing, incoming, gates=frozenset({TS}))
    assert (found is not None) == conflict
    assert found is None or "has conflicting configuration with already prepared claim" in found


# cmd/gpu-kubelet-plugin/consumable_shares_test.go L43-97 (16Gi card).
@pytest.mark.parametrize(
    ("mode", "memory_bytes", "expected"),
    [
        ("disabled", 16 * GI, {"memory": (16 * GI, None, None, None, None)}),
        ("unlimited", 16 * GI, {"memory": (16 * GI, 0, 0, 16 * GI, MI)}),
        ("unlimited", 10 * MI + 500, {"memory": (10 * MI, 0, 0, 10 * MI, MI)}),
        ("memory", 16 * GI, {"memory": (16 * GI, 16 * GI, MI, 16 * GI, MI)}),
        ("4", 16 * GI, {"memory": (16 * GI, 0, 0, 16 * GI, MI), "shares": (4, 1, 1, 4, 1)}),
    ],
)
def test_nvidia_policies_follow_the_consumable_shares_table(
    mode: str, memory_bytes: int, expected: dict
) -> None:
    keys = ("value", "default", "min_", "max_", "step")
    policy = dra.nvidia_memory_policy(mode, memory_bytes)
    assert policy == {name: dict(zip(keys, row, strict=True)) for name, row in expected.items()}


@pytest.mark.parametrize("mode", ["", "0", "-2", "lots", "memory "])
def test_a_consumable_shares_value_the_plugin_refuses_raises(mode: str) -> None:
    with pytest.raises(
        ValueError, match="invalid value for --consumable-shares"
    ):  # main.go L310-314
        dra.nvidia_memory_policy(mode, 16 * GI)


def policy(value: int, default: int | None, min_: int | None, max_=None, step=None) -> dict:
    return {"value": value, "default": default, "min_": min_, "max_": max_, "step": step}


# structured/internal/incubating/consumable_capacity_test.go L168-231 (validValues cases left out).
@pytest.mark.parametrize(
    ("requested", "capacity", "expected"),
    [
        (None, policy(1, None, None), 1),  # "empty"
        (None, policy(2, 1, 1), 1),  # "min in range"
        (2, policy(2, 1, 1), 2),  # "more than min in range"
        (1, policy(2, 1, 2), 2),  # "less than min in range"
        (2, policy(3, 1, 1, step=2), 3),  # "with step (round up)": min + n * step, not 2n
        (2, policy(2, 1, 1, step=1), 2),  # "with step (no remaining)"
    ],
)
def test_the_allocators_rounding_follows_its_own_table(
    requested: int | None, capacity: dict, expected: int
) -> None:
    assert dra.calculate_consumed_capacity(requested, **capacity) == expected


# consumable_capacity_test.go L118-158
@pytest.mark.parametrize(
    ("consumed", "capacity", "violates"),
    [
        (1, policy(2, 1, 1, max_=2), False),  # "less than maximum"
        (2, policy(2, 1, 1, max_=1), True),  # "more than maximum"
        (1, policy(2, None, None), False),  # "no constraint"
    ],
)
def test_the_policy_check_follows_the_allocators_table(
    consumed: int, capacity: dict, violates: bool
) -> None:
    capacity.pop("value")
    assert dra.violates_policy(consumed, **capacity) is violates


MEMORY_40GI = dra.nvidia_memory_policy("memory", 40 * GI)["memory"]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (4 * GI, 4 * GI),  # demo/specs/consumable-shares/memory-sharing.yaml
        (3 * MI // 2, 2 * MI),  # 1.5Mi rounds up to the next 1Mi
        (0, MI),  # below min: min
        (None, 40 * GI),  # no request: the whole card in memory mode
        (40 * GI, 40 * GI),
        (40 * GI + 1, None),  # rounds to 40Gi + 1Mi, above max: ineligible
        (41 * GI, None),
    ],
)
def test_a_memory_request_on_a_40gi_card_in_memory_mode(requested: int | None, expected) -> None:
    assert dra.consumed_capacity(requested, **MEMORY_40GI) == expected


def test_ten_4gi_claims_fill_a_40gi_card_and_the_eleventh_does_not_fit() -> None:
    assert dra.consumed_capacity(4 * GI, **MEMORY_40GI, already=36 * GI) == 4 * GI
    assert dra.consumed_capacity(4 * GI, **MEMORY_40GI, already=40 * GI) is None
    assert dra.consumed_capacity(None, **MEMORY_40GI, already=4 * GI) is None


def test_integer_and_unlimited_modes_consume_a_share_and_no_memory_by_default() -> None:
    # tests/bats/specs/gpu-consumable-shares-integer.yaml: capacity.requests.shares: 1
    card = dra.nvidia_memory_policy("4", 40 * GI)
    assert dra.claim_consumption({"shares": 1}, card) == {"memory": 0, "shares": 1}
    assert dra.claim_consumption({}, card, already={"shares": 4}) is None
    assert dra.claim_consumption({"shares": 5}, card) is None
    unlimited = dra.nvidia_memory_policy("unlimited", 40 * GI)
    assert dra.claim_consumption({}, unlimited) == {"memory": 0}
    assert dra.claim_consumption({"shares": 1}, unlimited) is None  # no such capacity


HAMI_A100 = dra.hami_device_capacity(40 * GI)


# demo/yaml/setup.yaml of Project-HAMi/k8s-dra-driver v0.1.0 (hami-dra-consumable-claims.yaml):
# single-gpu-0 {cores: 30, memory: 4Gi}; double-gpu-0's second request {cores: 60, memory: 8Gi}.
@pytest.mark.parametrize(
    ("requests", "consumed", "env"),
    [
        ({"cores": 30, "memory": 4 * GI}, {"cores": 30, "memory": 4 * GI}, ("30", "4096m")),
        ({"cores": 60, "memory": 8 * GI}, {"cores": 60, "memory": 8 * GI}, ("60", "8192m")),
        ({}, {"cores": 100, "memory": 40 * GI}, ("100", "40960m")),
        ({"memory": 3 * MI // 2}, {"cores": 100, "memory": 2 * MI}, ("100", "2m")),
    ],
)
def test_a_hami_claim_gives_the_env_hami_core_reads(requests: dict, consumed: dict, env) -> None:
    assert dra.claim_consumption(requests, HAMI_A100) == consumed
    assert dra.hami_container_env(consumed) == {
        "CUDA_DEVICE_SM_LIMIT_0": env[0],
        "CUDA_DEVICE_MEMORY_LIMIT_0": env[1],
    }


def test_hami_falls_back_to_60_percent_and_the_whole_card_without_consumed_capacity() -> None:
    # hami_core.go L224-226: what the env says when the allocation recorded no consumedCapacity
    assert dra.hami_container_env({}, 1, device_bytes=40 * GI) == {
        "CUDA_DEVICE_SM_LIMIT_1": "60",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "40960m",
    }


def test_a_hami_request_above_the_card_or_past_100_cores_is_ineligible() -> None:
    assert dra.claim_consumption({"memory": 41 * GI}, HAMI_A100) is None
    assert dra.claim_consumption({"cores": 101}, HAMI_A100) is None
    assert dra.claim_consumption({"cores": 30}, HAMI_A100, already={"cores": 80}) is None
    # a HAMi-shaped request on an NVIDIA card: the NVIDIA device has no `cores`
    assert dra.claim_consumption({"cores": 30, "memory": 4 * GI}, {"memory": MEMORY_40GI}) is None
