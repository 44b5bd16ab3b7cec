"""HAMi's own code, transcribed into Python: the oracle the HAMi backend's output is put to.
Each function names the Go it stands for, at Project-HAMi/HAMi v2.10.0
(4707fb02c91c545bc7343ce26dba4c32919f9a3e), with the chart's defaults (resource names
`nvidia.com/gpu`, `gpumem`, `gpumem-percentage`, `gpucores`; `defaultGPUNum: 1`,
`defaultMemory: 0`, `defaultCores: 0`, `memoryFactor: 1`; scheduler `hami-scheduler`,
`forceOverwriteDefaultScheduler: true`), and HAMi-core's memory hooks at
Project-HAMi/HAMi-core 8f3a89c67b037d8fdfe6c4cd4d8c4f0cd6504811.

Nothing here is imported from the product: a test compares the two.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

COUNT = "nvidia.com/gpu"
MEMORY = "nvidia.com/gpumem"
PERCENTAGE = "nvidia.com/gpumem-percentage"
CORES = "nvidia.com/gpucores"
SCHEDULER = "hami-scheduler"
HAMI_RESOURCES = (COUNT, MEMORY, PERCENTAGE, CORES)
MAX_INT32 = 2**31 - 1


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """webhook.go L75-98: init containers, then containers; ephemeral ones never."""
    spec = pod.get("spec", {})
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def _limits(container: Mapping[str, Any]) -> Mapping[str, Any]:
    return (container.get("resources") or {}).get("limits") or {}


def _requests(container: Mapping[str, Any]) -> Mapping[str, Any]:
    return (container.get("resources") or {}).get("requests") or {}


def _has_resource(container: Mapping[str, Any]) -> bool:
    """pkg/device/nvidia/device.go L398-415 `mutateContainerResource` (a key in limits), and
    L417-450 `defaultExclusiveCoreIfNeeded` (the count in limits or requests)."""
    limits = _limits(container)
    return any(name in limits for name in HAMI_RESOURCES) or COUNT in _requests(container)


def _privileged(container: Mapping[str, Any]) -> bool:
    """webhook.go L139-143 `isPrivilegedContainer`."""
    return (container.get("securityContext") or {}).get("privileged") is True


@dataclass(frozen=True)
class Admission:
    allowed: bool
    message: str = ""
    scheduler_name: str | None = None


def webhook_handle(pod: Mapping[str, Any]) -> Admission:
    """pkg/scheduler/webhook.go L53-123 `Handle`, for a CREATE of `pod`."""
    spec = pod.get("spec", {})
    if not spec.get("containers"):
        return Admission(False, "pod has no containers")  # L60-63
    named = spec.get("schedulerName") or ""
    if named not in ("", "default-scheduler", SCHEDULER):
        return Admission(True, "pod already has different scheduler assigned", named)  # L64-69
    for container in _containers(pod):
        percent = _limits(container).get(PERCENTAGE, _requests(container).get(PERCENTAGE))
        read = None if percent is None else _as_int64(percent)
        if read is not None and not 0 <= read <= 100:
            return Admission(False, f"invalid {PERCENTAGE} value {percent}")  # device.go L389-396
    has_resource = any(_has_resource(container) for container in _containers(pod))
    privileged = next((c["name"] for c in _containers(pod) if _privileged(c)), None)
    if privileged is not None and has_resource:
        return Admission(False, f"container {privileged} is privileged")  # L99-102
    if not has_resource:
        return Admission(True, scheduler_name=named or None)  # L104-106
    if spec.get("nodeName"):
        return Admission(False, "pod has node assigned")  # L107-112
    return Admission(True, scheduler_name=SCHEDULER)


@dataclass(frozen=True)
class ContainerDeviceRequest:
    """pkg/device/nvidia/device.go L520-600 `GenerateResourceRequests`: `nums` cards, each
    with `memreq` MiB (or `mem_percentage` % of it where no MiB are given; 101 for none) and
    `coresreq` % of its compute."""

    nums: int
    memreq: int = 0
    mem_percentage: int = 101
    coresreq: int = 0


def _as_int64(value: object) -> int | None:
    """A quantity that `Quantity.AsInt64` reads: a plain integer here (suffixes scale)."""
    text = str(value)
    scale = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    found = re.fullmatch(r"([0-9]+)([a-zA-Z]*)", text)
    if found is None or found.group(2) not in scale:
        return None
    return int(found.group(1)) * scale[found.group(2)]


def _amount(container: Mapping[str, Any], name: str) -> object | None:
    return _limits(container).get(name, _requests(container).get(name))


def generate_resource_requests(container: Mapping[str, Any]) -> ContainerDeviceRequest:
    written = _amount(container, COUNT)
    if written is None:
        return ContainerDeviceRequest(0)
    nums = _as_int64(written) or 0
    memreq = 0
    memory = _amount(container, MEMORY)
    if memory is not None:
        read = _as_int64(memory)
        if read is None or read < 0 or read > MAX_INT32:
            # L537-543: "rejecting to avoid silent under-allocation": no request at all
            return ContainerDeviceRequest(0)
        memreq = read
    mem_percentage = 101
    percent = _amount(container, PERCENTAGE)
    if percent is not None:
        read = _as_int64(percent)
        if read is not None and read > 0:
            mem_percentage = min(read, 100)  # L559-569
    if memreq == 0 and mem_percentage == 101:
        mem_percentage = 100  # L572-578: defaultMemory 0 is the whole card
    cores = _as_int64(_amount(container, CORES) or 0) or 0
    return ContainerDeviceRequest(nums, memreq, mem_percentage, cores)


def fit_memory_per_card(request: ContainerDeviceRequest, card_total_mib: int) -> int:
    """device.go L777-783 in `Fit`: the MiB charged to each of the `nums` cards chosen."""
    if request.mem_percentage != 101 and request.memreq == 0:
        return card_total_mib * request.mem_percentage // 100
    return request.memreq


def default_exclusive_cores(container: Mapping[str, Any]) -> bool:
    """device.go L417-450 `defaultExclusiveCoreIfNeeded`: whether the webhook adds
    `gpucores: 100` (a card to itself)."""
    present = {**_requests(container), **_limits(container)}
    if COUNT not in present or CORES in present:
        return False
    if PERCENTAGE in present:
        return str(present[PERCENTAGE]) == "100"
    return MEMORY not in present


def cu_mem_get_info_total(limit_mib: int, card_mib: int) -> int:
    """HAMi-core src/cuda/memory.c L486-514: the total a process is shown, the limit where
    one is set, never past the card."""
    if limit_mib == 0:
        return card_mib
    return min(limit_mib, card_mib)
