"""The DRA drivers' and Kubernetes' own code, transcribed into Python: the oracle the DRA
backend's output is put to. Each function names the Go it stands for, by repository, commit,
path and lines:

- kubernetes-sigs/dra-driver-nvidia-gpu 95932046683719c43b6a0dd9613c2e5aad5d6703 (main,
  2026-08-07; the newest commit of the stored snapshot): the opaque `GpuConfig`, its strict
  decoding, Normalize and Validate, the kubelet plugin's prepare path, and the consumable-shares
  request policies. It vendors k8s.io/api v0.36.0 (vendor/k8s.io/api/resource/v1/types.go) but
  not the allocator.
- kubernetes/dynamic-resource-allocation v0.36.0 (c44687d139199fd20ffb4b182f836fe0ed33987b, the
  version the NVIDIA go.mod names): the scheduler's consumable-capacity arithmetic,
  structured/internal/incubating/consumable_capacity.go. The experimental copy is identical at
  v0.36.0, and neither copy changed up to the snapshot's newest commit (3d036712, 2026-07-01).
- Project-HAMi/k8s-dra-driver v0.1.0 (ebeaad97463a2af48dcc5f5a2603f65eaf792da8): the device
  HAMi publishes and the env it writes from an allocation, cmd/hami-kubelet-plugin/hami_core.go.

Capacities are whole numbers in the capacity's unit (bytes for `memory`). Go reads a request
with `Quantity.Value()`, which rounds a fraction up, so an int here loses nothing a claim can
express for bytes; a fractional `cores` request cannot be written in this form.

Nothing here is imported from the product: a test compares the two.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from webhook.quantity import QuantityError
from webhook.quantity import parse_quantity as product_quantity

NVIDIA_REPO = "kubernetes-sigs/dra-driver-nvidia-gpu"
NVIDIA_COMMIT = "95932046683719c43b6a0dd9613c2e5aad5d6703"
NVIDIA_DRIVER = "gpu.nvidia.com"
NVIDIA_API_VERSION = "resource.nvidia.com/v1beta1"
NVIDIA_PATHS = {
    "api": "api/nvidia.com/resource/v1beta1/api.go",
    "gpuconfig": "api/nvidia.com/resource/v1beta1/gpuconfig.go",
    "sharing_api": "api/nvidia.com/resource/v1beta1/sharing.go",
    "validate": "api/nvidia.com/resource/v1beta1/validate.go",
    "device_state": "cmd/gpu-kubelet-plugin/device_state.go",
    "sharing": "cmd/gpu-kubelet-plugin/sharing.go",
    "consumable_shares": "cmd/gpu-kubelet-plugin/consumable_shares.go",
    "main": "cmd/gpu-kubelet-plugin/main.go",
    "featuregates": "pkg/featuregates/featuregates.go",
    "k8s_types": "vendor/k8s.io/api/resource/v1/types.go",
    "json_serializer": "vendor/k8s.io/apimachinery/pkg/runtime/serializer/json/json.go",
}
K8S_DRA_REPO = "kubernetes/dynamic-resource-allocation"
K8S_DRA_TAG = "v0.36.0"
K8S_DRA_COMMIT = "c44687d139199fd20ffb4b182f836fe0ed33987b"
K8S_DRA_PATHS = {
    "consumable_capacity": "structured/internal/incubating/consumable_capacity.go",
    "allocator": "structured/internal/incubating/allocator_incubating.go",
}
HAMI_REPO = "Project-HAMi/k8s-dra-driver"
HAMI_TAG = "v0.1.0"
HAMI_COMMIT = "ebeaad97463a2af48dcc5f5a2603f65eaf792da8"
HAMI_DRIVER = "hami-core-gpu.project-hami.io"
HAMI_PATHS = {
    "hami_core": "cmd/hami-kubelet-plugin/hami_core.go",
    "device_state": "cmd/hami-kubelet-plugin/device_state.go",
}

MIB = 2**20
MAX_INT64 = 2**63 - 1

# ---------------------------------------------------------------------------------------------
# Quantities (k8s.io/apimachinery/pkg/api/resource/quantity.go, vendored v0.36.0)
# ---------------------------------------------------------------------------------------------

QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def parse_quantity(value: object) -> Fraction:
    """`resource.ParseQuantity` / `Quantity.UnmarshalJSON` (quantity.go): a JSON string or
    number. The grammar is the product's own reader of it (webhook/quantity.py, tested against
    apimachinery's cases in tests/unit/test_quantity.py); where Go returns an error, ValueError
    with apimachinery's text."""
    text = value.strip() if isinstance(value, str) else value
    try:
        return product_quantity(text)
    except QuantityError:
        raise ValueError(QUANTITY_FORMAT_ERROR) from None


def quantity_value(value: object) -> int:
    """`Quantity.Value()`: the integer value, a fraction rounded away from zero (amount.go
    `AsScaledInt64` / `inf.RoundUp`)."""
    exact = parse_quantity(value)
    return math.ceil(exact) if exact >= 0 else math.floor(exact)


# ---------------------------------------------------------------------------------------------
# NVIDIA: the opaque GpuConfig in a claim
# ---------------------------------------------------------------------------------------------

TIME_SLICE_INTERVALS = ("Default", "Short", "Medium", "Long")  # sharing.go L34-39
# api.go L68-76 registers these kinds in resource.nvidia.com/v1beta1 ...
_NVIDIA_KINDS = (
    "GpuConfig",
    "MigDeviceConfig",
    "VfioDeviceConfig",
    "ComputeDomainChannelConfig",
    "ComputeDomainDaemonConfig",
    "ComputeDomain",
    "ComputeDomainClique",
)
# ... and api.go L77 `metav1.AddToGroupVersion` adds these to the same group version
# (vendor/k8s.io/apimachinery/pkg/apis/meta/v1/register.go `optionsTypes`, WatchEvent) ...
_META_KINDS = (
    "WatchEvent",
    "ListOptions",
    "GetOptions",
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
)
# ... and these as unversioned kinds, which `Scheme.New` finds under any apiVersion.
_UNVERSIONED_KINDS = ("Status", "APIVersions", "APIGroupList", "APIGroup", "APIResourceList")

# The Go types the strict decoder fills (gpuconfig.go L29-32, sharing.go L63-92): for each
# struct, its Go name and its JSON fields; leaves name their Go type.
_TIME_SLICING_CONFIG = ("TimeSlicingConfig", {"interval": "v1beta1.TimeSliceInterval"})
_MPS_CONFIG = (
    "MpsConfig",
    {
        "defaultActiveThreadPercentage": "int",
        "defaultPinnedDeviceMemoryLimit": "resource.Quantity",
        "defaultPerDevicePinnedMemoryLimit": "v1beta1.MpsPerDevicePinnedMemoryLimit",
        "multiUser": "bool",
    },
)
_GPU_SHARING = (
    "GpuSharing",
    {
        "strategy": "v1beta1.GpuSharingStrategy",
        "timeSlicingConfig": _TIME_SLICING_CONFIG,
        "mpsConfig": _MPS_CONFIG,
    },
)
_GPU_CONFIG = ("GpuConfig", {"apiVersion": "string", "kind": "string", "sharing": _GPU_SHARING})

# pkg/featuregates/featuregates.go L252-279 `ValidateFeatureGates`, the pairs among gates that
# are off by default; the plugin refuses to start with them (ValueError here).
_EXCLUSIVE_GATES = (
    ("DynamicMIG", "PassthroughSupport"),
    ("DynamicMIG", "NVMLDeviceHealthCheck"),
    ("DynamicMIG", "MPSSupport"),
    ("PassthroughSupport", "NVMLDeviceHealthCheck"),
)


class _DecodeError(Exception):
    """A decode failure: the text Go's decoder returns."""


def _json_kind(value: object) -> str:
    """The JSON type name Go's `UnmarshalTypeError` prints (encoding/json decode.go)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array"


def _decode_struct(
    value: Mapping[str, Any], shape: tuple[str, dict[str, Any]], path: str, strict: list[str]
) -> dict[str, Any]:
    """sigs.k8s.io/json `UnmarshalStrict` (vendor/sigs.k8s.io/json/json.go L98-123): case
    sensitive; an unknown field is a strict error `unknown field "<path>"`
    (internal/golang/encoding/json/kubernetes_patch.go L126-141), collected while decoding
    goes on; a type mismatch is fatal."""
    name, fields = shape
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in fields:
            strict.append(f"unknown field {json.dumps(where)}")
            continue
        if item is None:
            # JSON null leaves a pointer, map or string at its zero value.
            out[key] = None
            continue
        target = fields[key]
        if isinstance(target, tuple):
            if not isinstance(item, Mapping):
                raise _DecodeError(_type_error(item, name, where, f"v1beta1.{target[0]}"))
            out[key] = _decode_struct(item, target, where, strict)
        else:
            out[key] = _decode_leaf(item, target, name, where)
    return out


def _type_error(item: object, struct: str, where: str, go_type: str) -> str:
    """`UnmarshalTypeError.Error()` with sigs.k8s.io/json's field context (decode.go L276-290):
    the innermost struct's name, then the field path from the root."""
    kind = _json_kind(item)
    if go_type == "int" and kind.startswith("number"):
        return f"json: cannot unmarshal {kind} into Go struct field {struct}.{where} of type int"
    kind = kind.split(" ")[0]
    return f"json: cannot unmarshal {kind} into Go struct field {struct}.{where} of type {go_type}"


def _decode_leaf(item: object, go_type: str, struct: str, where: str) -> object:
    """One JSON value into a Go leaf type: strings, int, bool, `resource.Quantity`
    (`Quantity.UnmarshalJSON`, quantity.go L733) and the per-device limit map."""
    if go_type in ("string", "v1beta1.GpuSharingStrategy", "v1beta1.TimeSliceInterval"):
        if not isinstance(item, str):
            raise _DecodeError(_type_error(item, struct, where, go_type))
        return item
    if go_type == "int":
        if isinstance(item, bool) or not isinstance(item, int):
            raise _DecodeError(_type_error(item, struct, where, go_type))
        return item
    if go_type == "bool":
        if not isinstance(item, bool):
            raise _DecodeError(_type_error(item, struct, where, go_type))
        return item
    if go_type == "resource.Quantity":
        try:
            return parse_quantity(item)
        except ValueError as error:
            raise _DecodeError(str(error)) from None
    # MpsPerDevicePinnedMemoryLimit: map[string]resource.Quantity (sharing.go L60); a null
    # value reaches Quantity.UnmarshalJSON, which reads it as zero.
    if not isinstance(item, Mapping):
        raise _DecodeError(_type_error(item, struct, where, go_type))
    limits: dict[str, Fraction] = {}
    for key, limit in item.items():
        try:
            limits[str(key)] = Fraction(0) if limit is None else parse_quantity(limit)
        except ValueError as error:
            raise _DecodeError(str(error)) from None
    return limits


def _decode(parameters: object) -> tuple[str, dict[str, Any] | None]:
    """`runtime.Decode(configapi.StrictDecoder, raw)` (api.go L92-97; json.go L138-216):
    apiVersion and kind first (meta.go L48-63 `Interpret`), then the registered type, then the
    strict unmarshal. Returns the kind and, for a GpuConfig, its decoded fields."""
    if not isinstance(parameters, Mapping):
        raise _DecodeError("couldn't get version/kind; json parse error")
    api_version, kind = parameters.get("apiVersion") or "", parameters.get("kind") or ""
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise _DecodeError("couldn't get version/kind; json parse error")
    if api_version.count("/") > 1:  # schema.ParseGroupVersion
        raise _DecodeError(f"unexpected GroupVersion string: {api_version}")
    group, _, version = api_version.rpartition("/") if api_version != "/" else ("", "", "")
    raw = json.dumps(parameters, separators=(",", ":"), default=str)
    if not kind:
        raise _DecodeError(f"Object 'Kind' is missing in '{raw}'")
    if not version:
        raise _DecodeError(f"Object 'apiVersion' is missing in '{raw}'")
    registered = f"{group}/{version}" == NVIDIA_API_VERSION and kind in (
        *_NVIDIA_KINDS,
        *_META_KINDS,
    )
    if not registered and kind not in _UNVERSIONED_KINDS:
        # runtime/error.go L68; Go appends ` in scheme "<call site of NewScheme>"`.
        gv = f"{group}/{version}" if group else version
        raise _DecodeError(f'no kind "{kind}" is registered for version "{gv}"')
    if kind != "GpuConfig":
        # The other kinds' fields are not transcribed: only GpuConfig is strict-checked here.
        return kind, None
    strict: list[str] = []
    decoded = _decode_struct(parameters, _GPU_CONFIG, "", strict)
    if strict:  # runtime/error.go L138-148
        raise _DecodeError("strict decoding error: " + ", ".join(strict))
    return kind, decoded


def _normalize(config: dict[str, Any], gates: frozenset[str]) -> dict[str, Any]:
    """gpuconfig.go L45-65 `GpuConfig.Normalize`: with TimeSlicingSettings on, TimeSlicing
    without a timeSlicingConfig gets `{interval: Default}`; with MPSSupport on, MPS without an
    mpsConfig gets `{}`. Nothing else is defaulted."""
    sharing = config.get("sharing")
    if sharing is None:
        return config
    sharing = dict(sharing)
    strategy = sharing.get("strategy")
    timeslicing = "TimeSlicingSettings" in gates and strategy == "TimeSlicing"
    if timeslicing and sharing.get("timeSlicingConfig") is None:
        sharing["timeSlicingConfig"] = {"interval": "Default"}
    if "MPSSupport" in gates and strategy == "MPS" and sharing.get("mpsConfig") is None:
        sharing["mpsConfig"] = {}
    return {**config, "sharing": sharing}


def _validate(config: Mapping[str, Any], gates: frozenset[str]) -> str | None:
    """gpuconfig.go L68-73 `GpuConfig.Validate` -> validate.go L86-97 `GpuSharing.Validate`,
    L31-45 `validateSharingStrategy`, L58-70 the interval, L73-83 `MpsConfig.Validate`.
    Validate does not look at the other strategy's block (that is checked at apply time), nor
    at the pinned-memory limits (checked when the MPS daemon starts)."""
    sharing = config.get("sharing")
    if sharing is None:
        return None
    strategy = sharing.get("strategy") or ""
    gate = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}.get(strategy)
    if gate is None:
        return (
            f"unknown GPU sharing strategy: {strategy}, supported GPU sharing strategies: "
            "TimeSlicing, MPS"
        )
    if gate not in gates:
        return (
            f'"{strategy}" is selected as the GPU sharing strategy, but the "{gate}" '
            "feature gate is not enabled"
        )
    if strategy == "TimeSlicing":
        interval = (sharing.get("timeSlicingConfig") or {}).get("interval")
        if interval is None:
            # `c.Interval.Validate()` with a nil *TimeSliceInterval and a value receiver:
            # Go dereferences nil and panics. A `timeSlicingConfig: {}` (block present,
            # interval left out) is not defaulted by Normalize (it only fills a nil block).
            # The gRPC interceptor logs and re-panics (vendor/.../kubeletplugin/
            # nonblockinggrpcserver.go L151-156): the plugin crashes, it does not refuse.
            return "panic: runtime error: invalid memory address or nil pointer dereference"
        if interval not in TIME_SLICE_INTERVALS:
            return (
                f"unknown time-slice interval: {interval}, supported time-slice intervals: "
                + ", ".join(TIME_SLICE_INTERVALS)
            )
        return None
    percentage = (sharing.get("mpsConfig") or {}).get("defaultActiveThreadPercentage")
    if percentage is not None and percentage < 0:
        return "active thread percentage must not be negative"
    if percentage is not None and percentage > 100:
        return "active thread percentage must not be greater than 100"
    return None


def _megabyte(limit: Fraction) -> int:
    """sharing.go (api) L233-240 `limit.Megabyte`: Value()/1024/1024 in int64 (truncating);
    valid when > 0, i.e. at least 1Mi. Passed to MPS as "<n>M"."""
    value = math.ceil(limit) if limit >= 0 else math.floor(limit)
    return int(value / MIB) if value < 0 else value // MIB


def _pinned_limits_refusal(mps: Mapping[str, Any]) -> str | None:
    """cmd/gpu-kubelet-plugin/sharing.go L256-262 -> api sharing.go L193-231
    `MpsPerDevicePinnedMemoryLimit.Normalize`, for a claim of one device (index "0").

    Not expressible: a key may also be the allocated GPU's UUID (uuidSet.Normalize L260-264),
    which is known only on the node; every non-integer key is treated as not matching. Go
    walks the map in random order; with several bad keys the first error named may differ."""
    default = mps.get("defaultPinnedDeviceMemoryLimit")
    if default is not None and _megabyte(default) <= 0:
        return f"invalid limit: default value set too low: {_format(default)}"
    for key, limit in (mps.get("defaultPerDevicePinnedMemoryLimit") or {}).items():
        if not re.fullmatch(r"[+-]?[0-9]+", key):
            return f"invalid device: unable to parse key as an integer: {key}"
        if int(key) != 0:
            return f"invalid device: invalid device index: {int(key)}"
        if _megabyte(limit) <= 0:
            return f"invalid limit: value set too low: {key}: {_format(limit)}"
    return None


def _format(quantity: Fraction) -> str:
    """Go prints the `*limit` with %v (a struct dump); the value is printed here instead."""
    return str(quantity.numerator) if quantity.denominator == 1 else str(float(quantity))


def _startup_refusal(gates: frozenset[str]) -> None:
    """featuregates.go L252-279 `ValidateFeatureGates` (the pairs of default-off gates)."""
    for first, second in _EXCLUSIVE_GATES:
        if first in gates and second in gates:
            raise ValueError(f"feature gate {first} is currently mutually exclusive with {second}")
    if "DeviceMetadata" in gates and "PassthroughSupport" not in gates:
        raise ValueError(
            "feature gate DeviceMetadata requires PassthroughSupport to also be enabled"
        )


def nvidia_gpu_config_refusal(
    parameters: Mapping[str, Any],
    *,
    consumable_shares: bool,
    gates: frozenset[str],
    names_request: bool = False,
) -> str | None:
    """What the NVIDIA GPU kubelet plugin does, at NodePrepareResources, with one opaque config
    (`config[].opaque {driver: gpu.nvidia.com, parameters}`) on a claim allocated one full GPU
    (`gpu-<minor>`, type gpu). Returns the driver's error (with device_state.go's wrapping), or
    None when the claim is prepared. Transcribes cmd/gpu-kubelet-plugin/device_state.go:
    L827-895 `prepareDevices`, L1552-1620 `getConfigResultsMap` / `getDeviceConfigsWithDefaults`,
    L1406-1459 `GetOpaqueDeviceConfigs` (strict decode), L1622-1651 the kind checks, and
    L1155-1225 `applySharingConfig`; cmd/gpu-kubelet-plugin/sharing.go L218-272 (MPS start).

    `consumable_shares` is `isConsumableSharesEnabled` (consumable_shares.go L29-38): the
    ConsumableShares gate on and `--consumable-shares` not `disabled`. `gates` are the driver
    feature gates switched on (TimeSlicingSettings, MPSSupport, DynamicMIG, ...); a set the
    plugin refuses to start with raises ValueError. `names_request` says whether the config
    lists the GPU request in `requests` (a config without requests applies only to devices of
    its kind, device_state.go L1581-1587).

    Not transcribed (needs the node): `multiUser: true` needs a Volta or newer GPU
    (sharing.go L264-271); SetTimeSlice and the MPS daemon can fail on the hardware; the
    optional validating webhook (cmd/webhook/main.go L244-285, chart `webhook.enabled: false`)
    runs the same decode/Normalize/Validate at admission instead of at prepare.
    """
    _startup_refusal(gates)
    try:
        kind, config = _decode(parameters)
    except _DecodeError as error:
        # L1445-1448 and L1601-1603
        return f"error getting opaque device configs: error decoding config parameters: {error}"
    if kind in ("MigDeviceConfig", "VfioDeviceConfig"):
        if not names_request:
            return None  # L1581-1583: skipped for a GPU; the default GpuConfig applies.
        # L1622-1638 `validateDeviceConfigType`
        return f'cannot apply {kind} to device of type "gpu"'
    if kind != "GpuConfig":
        if not names_request:
            return None  # L1640-1651 `matchesDeviceType`: false for any other kind.
        return "runtime object is not a recognized configuration"  # L864-873
    assert config is not None
    config = _normalize(config, gates)  # L876-878
    invalid = _validate(config, gates)
    if invalid is not None:
        if invalid.startswith("panic:"):
            return invalid
        return f"error validating GPU config: {invalid}"  # L881-883
    sharing = config.get("sharing") or {}
    strategy = sharing.get("strategy")
    # L1176-1196; the text at L1179 also names the requests and the claim UID.
    if "TimeSlicingSettings" in gates and strategy == "TimeSlicing":
        if sharing.get("mpsConfig") is not None:  # api sharing.go L134-136
            return (
                "error applying config: error getting timeslice config: "
                "cannot use MpsConfig with the 'TimeSlicing' strategy"
            )
        return None
    if "MPSSupport" in gates and strategy == "MPS":
        if consumable_shares:  # L1200-1202
            return (
                "error applying config: MPS sharing is not supported when consumable shares "
                "is enabled"
            )
        if "DynamicMIG" in gates:  # L1203-1208 (startup already refuses the pair)
            return (
                "error applying config: MPS is not yet supported when using "
                "featureGates.DynamicMIG=true"
            )
        if sharing.get("timeSlicingConfig") is not None:  # api sharing.go L153-155
            return (
                "error applying config: error getting MPS configuration: "
                "cannot use TimeSlicingConfig with the 'MPS' strategy"
            )
        limits = _pinned_limits_refusal(sharing.get("mpsConfig") or {})
        if limits is not None:
            return (
                "error applying config: error starting MPS control daemon: error transforming "
                f"DefaultPerDevicePinnedMemoryLimit into string: {limits}"
            )
    return None


def nvidia_shared_device_conflict(
    existing: Mapping[str, Any] | None,
    incoming: Mapping[str, Any] | None,
    *,
    gates: frozenset[str],
) -> str | None:
    """device_state.go L1480-1533 `validateNoOverlappingPreparedDevices` with consumable shares
    on, for a full GPU already prepared for another claim: the two claims' configs for the
    device (None: no config, so `DefaultGpuConfig()`, L1608-1611) are normalized and validated
    (L1653-1674) and must be `reflect.DeepEqual` (L1519-1521). Returns the conflict error or
    None. Invalid configs raise ValueError (the error names the claim whose config failed).

    DeepEqual compares Quantity structs, not values; quantities here compare by value. They
    sit only in mpsConfig, which never reaches a prepared claim under consumable shares."""
    normalized = []
    for config in (existing, incoming):
        if config is None:
            normalized.append({"apiVersion": NVIDIA_API_VERSION, "kind": "GpuConfig"})
            continue
        try:
            kind, decoded = _decode(config)
        except _DecodeError as error:
            raise ValueError(f"error decoding config parameters: {error}") from None
        if kind != "GpuConfig" or decoded is None:
            raise ValueError(f"not a GpuConfig: {kind}")
        decoded = _normalize(decoded, gates)
        invalid = _validate(decoded, gates)
        if invalid is not None:
            raise ValueError(f"error validating config: {invalid}")
        normalized.append(decoded)
    if _without_nil(normalized[0]) != _without_nil(normalized[1]):
        return (
            "requested device <device> has conflicting configuration with already prepared "
            "claim <claim-uid>"
        )
    return None


def _without_nil(value: object) -> object:
    """A decoded config as Go holds it: a field left out and a field set to null are the same
    nil pointer; an empty map stays distinct from a nil one (reflect.DeepEqual)."""
    if isinstance(value, Mapping):
        return {key: _without_nil(item) for key, item in value.items() if item is not None}
    return value


# ---------------------------------------------------------------------------------------------
# Kubernetes: consumable capacity (dynamic-resource-allocation v0.36.0)
# ---------------------------------------------------------------------------------------------


def calculate_consumed_capacity(
    requested: int | None,
    *,
    value: int,
    default: int | None,
    min_: int | None,
    max_: int | None,
    step: int | None,
) -> int:
    """consumable_capacity.go L83-97 `calculateConsumedCapacity`, L102-107 `fillEmptyRequest`
    and L114-132 `roundUpRange`: the amount before the policy check. No request: the policy's
    default, else the capacity's value. A request under a validRange with a min: min if below
    it, else `min + step * ceil((requested - min) / step)` (so steps count from min, not from
    zero), or the request as is without a step. Without a validRange: the request as is.
    validValues (L93-94, L136-146) is not modelled; neither driver publishes it."""
    if requested is None:
        return default if default is not None else value
    if min_ is None:
        return requested
    if requested < min_:
        return min_
    if step is None:
        return requested
    added = requested - min_
    n = added // step
    if added % step != 0:
        n += 1
    return min_ + step * n


def violates_policy(
    consumed: int, *, default: int | None, min_: int | None, max_: int | None, step: int | None
) -> bool:
    """consumable_capacity.go L167-202 `violatesPolicy` / `violateValidRange`: the default is
    always allowed; otherwise above max, or (with a step) not min plus a multiple of step."""
    if default is not None and consumed == default:
        return False
    if min_ is None and max_ is None and step is None:
        return False  # no validRange
    if min_ is None:
        raise ValueError("validRange.min is required (types.go L628-635)")
    if max_ is not None and consumed > max_:
        return True
    return step is not None and (consumed - min_) % step != 0


def consumed_capacity(
    requested: int | None,
    *,
    value: int,
    default: int | None,
    min_: int | None,
    max_: int | None,
    step: int | None,
    already: int = 0,
) -> int | None:
    """consumable_capacity.go L29-62 `CmpRequestOverCapacity` for one capacity of a device:
    how much a request consumes (calculate_consumed_capacity), or None when the device is
    ineligible: the amount violates the policy (L43-45), or it and what other allocations
    already consume (`already`) exceed the capacity's value (L57-59). The allocator skips an
    ineligible device (allocator_incubating.go L1111-1123)."""
    consumed = calculate_consumed_capacity(
        requested, value=value, default=default, min_=min_, max_=max_, step=step
    )
    if violates_policy(consumed, default=default, min_=min_, max_=max_, step=step):
        return None
    if already + consumed > value:
        return None
    return consumed


def claim_consumption(
    requests: Mapping[str, int],
    device: Mapping[str, Mapping[str, int | None]],
    *,
    already: Mapping[str, int] | None = None,
) -> dict[str, int] | None:
    """consumable_capacity.go L29-62 `CmpRequestOverCapacity` and L150-164
    `GetConsumedCapacityFromRequest` over a whole device (`device`: capacity name to the
    keyword arguments of consumed_capacity, as the two policy functions below return): the
    `consumedCapacity` the allocation records, or None when the device is ineligible. A request
    for a capacity the device lacks makes it ineligible (L31-33, L65-76). Every capacity of the
    device is consumed, requested or not."""
    if any(name not in device for name in requests):
        return None
    used = already or {}
    result: dict[str, int] = {}
    for name, policy in device.items():
        consumed = consumed_capacity(
            requests.get(name),
            value=int(policy["value"] or 0),
            default=policy.get("default"),
            min_=policy.get("min_"),
            max_=policy.get("max_"),
            step=policy.get("step"),
            already=used.get(name, 0),
        )
        if consumed is None:
            return None
        result[name] = consumed
    return result


def _capacity(
    value: int,
    default: int | None = None,
    min_: int | None = None,
    max_: int | None = None,
    step: int | None = None,
) -> dict[str, int | None]:
    """A `resourceapi.DeviceCapacity` (types.go L541-564, L577-652) flattened to the keyword
    arguments of consumed_capacity: no policy when default, min_, max_ and step are None."""
    return {"value": value, "default": default, "min_": min_, "max_": max_, "step": step}


def nvidia_memory_policy(mode: str, device_bytes: int) -> dict[str, dict[str, int | None]]:
    """cmd/gpu-kubelet-plugin/consumable_shares.go L40-119 `applyConsumableShares` for a full
    GPU, whose only capacity is `memory` (partitions.go L34-43 `fullGpuCapacity`): capacity name
    to the keyword arguments of consumed_capacity. `mode` is `--consumable-shares`; a value the
    plugin refuses at startup (main.go L306-316) raises ValueError.

    - `disabled`: memory as NVML reports it, no policy, no allowMultipleAllocations.
    - otherwise allowMultipleAllocations is true and memory is rounded down to 1Mi (L61-66);
      `memory`: default the whole, validRange {min 1Mi, max whole, step 1Mi} (L80-89);
      `unlimited`: default 0, {min 0, max whole, step 1Mi} (L69-78); an integer N: as unlimited
      plus `shares` {value N, default 1, min 1, max N, step 1} (L91-117).

    MIG devices also carry multiprocessors, copyEngines, decoders, encoders, jpegEngines,
    ofaEngines and memorySliceN without a policy (mig.go L118-135, deviceinfo.go L258-281);
    unrequested, each consumes its whole value, so a second allocation does not fit."""
    named = mode in ("disabled", "memory", "unlimited")
    if not named and (not re.fullmatch(r"[+-]?[0-9]+", mode) or int(mode) <= 0):
        raise ValueError(
            f"invalid value for --consumable-shares: {json.dumps(mode)} (must be 'disabled', "
            "'memory', 'unlimited', or a positive integer)"
        )
    if mode == "disabled":
        return {"memory": _capacity(device_bytes)}
    whole = device_bytes // MIB * MIB
    if mode == "memory":
        return {"memory": _capacity(whole, whole, MIB, whole, MIB)}
    policy = {"memory": _capacity(whole, 0, 0, whole, MIB)}
    if mode != "unlimited":
        shares = int(mode)
        policy["shares"] = _capacity(shares, 1, 1, shares, 1)
    return policy


# ---------------------------------------------------------------------------------------------
# HAMi: Project-HAMi/k8s-dra-driver v0.1.0
# ---------------------------------------------------------------------------------------------


def hami_device_capacity(device_bytes: int) -> dict[str, dict[str, int | None]]:
    """cmd/hami-kubelet-plugin/hami_core.go L50-114 `HAMiGpuInfo.GetDevice`: every GPU is
    published as `hami-gpu-<minor>` with allowMultipleAllocations true (L111) and
    `cores` {value 100, default 100, validRange {min 0, max 100, step 1}} (L88-98) and
    `memory` {value bytes, default bytes, validRange {min 1Mi, max bytes, step 1Mi}} (L99-109).
    Memory is not rounded to 1Mi: API validation wants max and default to be multiples of
    step (types.go L645-647), so a card whose NVML total is not MiB-aligned would not publish."""
    return {
        "cores": _capacity(100, 100, 0, 100, 1),
        "memory": _capacity(device_bytes, device_bytes, MIB, device_bytes, MIB),
    }


def hami_container_env(
    consumed: Mapping[str, int], index: int = 0, *, device_bytes: int | None = None
) -> dict[str, str]:
    """cmd/hami-kubelet-plugin/hami_core.go L196-275 `GetCDIContainerEdits`, the limits for
    the device numbered `index`, from the allocation's `consumedCapacity` for it (L184-194):
    `CUDA_DEVICE_SM_LIMIT_<i>` = cores (L229-235), else "60" (L224);
    `CUDA_DEVICE_MEMORY_LIMIT_<i>` = memory // 1Mi + "m" (L236-242), else the whole card
    (`device_bytes`, L225). A value `AsInt64` cannot read (past int64) also falls back.

    With allowMultipleAllocations and DRAConsumableCapacity, consumedCapacity holds every
    capacity of the device (claim_consumption), so the fallbacks apply only when the scheduler
    recorded none. Left out: `CUDA_DEVICE_MEMORY_SHARED_CACHE` (a fresh random path, L215) and
    the mounts (libvgpu.so via /etc/ld.so.preload). `index` counts the config group's devices
    in Go map order (L218-246), which is random when a claim has more than one."""
    sm_limit = "60"
    cores = consumed.get("cores")
    if cores is not None and -MAX_INT64 <= cores <= MAX_INT64:
        sm_limit = str(cores)
    memory = consumed.get("memory")
    if memory is not None and 0 <= memory <= MAX_INT64:
        memory_limit = f"{memory // MIB}m"
    elif device_bytes is not None:
        memory_limit = f"{device_bytes // MIB}m"
    else:
        raise ValueError("no memory in consumedCapacity: the fallback needs device_bytes")
    return {
        f"CUDA_DEVICE_SM_LIMIT_{index}": sm_limit,
        f"CUDA_DEVICE_MEMORY_LIMIT_{index}": memory_limit,
    }
