"""KAI Scheduler's own code, transcribed line for line into Python: the oracle the KAI
backend's output is put to. Each function names the Go it stands for, at
kai-scheduler/KAI-Scheduler d5bc503a146317e51037d89775d77172c6d12f71 (v0.17.0+9). Go's
float64 is Python's float, `int64(x)` truncates toward zero as `int(x)` does, and Go's
`%.2f` rounds the exact binary value as Python's `format` does.

Nothing here is imported from the product: a test compares the two.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_FRACTION_NUM_DEVICES = "gpu-fraction-num-devices"
MPS = "mps"
QUEUE_LABEL = "kai.scheduler/queue"  # pkg/common/constants/constants.go L20
DEFAULT_QUEUE = "default-queue"  # constants.go L22
NVIDIA_GPU = "nvidia.com/gpu"

# pkg/scheduler/api/node_info/node_info.go L48-55
DEFAULT_GPU_MEMORY = 100
TIB_IN_MIB = 1024 * 1024


def get_node_gpu_memory(label: str | None) -> tuple[int, bool]:
    """node_info.go L660-674 `getNodeGpuMemory`: the label as MiB (bytes where it is at least
    a TiB in MiB), floored to 100; `DefaultGpuMemory` and not synced without one."""
    if label is None or not re.fullmatch(r"[+-]?[0-9]+", label):
        return DEFAULT_GPU_MEMORY, False
    value = int(label)
    if value >= TIB_IN_MIB:  # !checkGpuMemoryIsInMib
        value = value // TIB_IN_MIB  # convertBytesToMib
    return value - value % 100, True


def gpu_memory_fractional_on_node(memory: int, memory_of_every_gpu: int) -> float:
    """gpu_sharing_node_info.go L355-358 `getGpuMemoryFractionalOnNode`."""
    exact_fraction = float(memory) / float(memory_of_every_gpu)
    return math.ceil(exact_fraction * 100) / 100


@dataclass(frozen=True)
class GpuRequest:
    """pkg/scheduler/api/pod_info/pod_info.go L521-543: the share a pod's annotations ask
    for (a fraction wins where both parse, being read second)."""

    fraction: float = 0.0
    memory: int = 0


def read_gpu_request(annotations: Mapping[str, str]) -> GpuRequest:
    memory = 0
    fraction = 0.0
    if GPU_MEMORY in annotations:
        try:
            memory = int(annotations[GPU_MEMORY])
        except ValueError:
            memory = 0
    if GPU_FRACTION in annotations:
        fraction = float(annotations[GPU_FRACTION])
    return GpuRequest(fraction, memory)


def resource_gpu_portion(request: GpuRequest, memory_of_every_gpu: int) -> float:
    """node_info.go L648-653 `getResourceGpuPortion`."""
    if request.memory > 0 and request.fraction == 0:
        return gpu_memory_fractional_on_node(request.memory, memory_of_every_gpu)
    return request.fraction


def resource_gpu_memory(request: GpuRequest, memory_of_every_gpu: int) -> int:
    """node_info.go L640-646 `GetResourceGpuMemory`: what the scheduler holds on the card."""
    if request.memory > 0 and request.fraction == 0:
        return request.memory
    return int(request.fraction * float(memory_of_every_gpu))


def bind_request_portion(portion: float) -> str:
    """pkg/scheduler/cache/cache.go L377-380: `fmt.Sprintf("%.2f", ...)`."""
    return f"{portion:.2f}"


def hami_core_limit(node_labels: Mapping[str, str], portion: str) -> str | None:
    """pkg/binder/plugins/hamicore/hami_core.go L52-78: the isolator's
    CUDA_DEVICE_MEMORY_LIMIT, from the raw label; None where PreBind skips it (L39-42)."""
    label = node_labels.get("nvidia.com/gpu.memory")
    if label is None or not re.fullmatch(r"[+-]?[0-9]+", label):
        return None
    gpu_portion = float(portion)
    if gpu_portion <= 0:
        return None
    allocated = int(float(int(label)) * gpu_portion)
    return f"{allocated}m"


@dataclass(frozen=True)
class Binding:
    """What KAI makes of a share on a node: the scheduler's hold, the portion it passes on,
    and the isolator's cap (None: none is written)."""

    reserved_mib: int
    portion: str
    limit: str | None


def bind(annotations: Mapping[str, str], node_labels: Mapping[str, str]) -> Binding:
    memory, _ = get_node_gpu_memory(node_labels.get("nvidia.com/gpu.memory"))
    request = read_gpu_request(annotations)
    portion = bind_request_portion(resource_gpu_portion(request, memory))
    return Binding(
        resource_gpu_memory(request, memory), portion, hami_core_limit(node_labels, portion)
    )


def _first_gpu_limit(pod: Mapping[str, Any]) -> bool:
    """gpu_request_validator.go L105-113 `getFirstGPULimit`: limits only."""
    spec = pod.get("spec", {})
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind, []) or []:
            limits = (container.get("resources") or {}).get("limits") or {}
            if NVIDIA_GPU in limits:
                return True
    return False


def validate_gpu_sharing(pod: Mapping[str, Any], sharing_enabled: bool = True) -> str | None:
    """pkg/admission/webhook/v1alpha2/gpusharing/gpu_sharing.go L40-48 and
    pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go L16-113: KAI's
    admission refusal of a pod, or None."""
    annotations = pod.get("metadata", {}).get("annotations") or {}
    has_fraction = GPU_FRACTION in annotations
    has_memory = GPU_MEMORY in annotations
    if not sharing_enabled and (has_fraction or has_memory):
        return "attempting to create a pod with gpu sharing request, while GPU sharing is disabled"
    if not has_fraction and not has_memory and annotations.get(MPS) == "true":
        return "MPS is only supported with GPU fraction request"
    whole = _first_gpu_limit(pod)
    if has_fraction and whole:
        return "cannot have both GPU fraction request and whole GPU resource request/limit"
    if has_memory and (has_fraction or whole):
        return "cannot request both GPU and GPU memory"
    if GPU_FRACTION_NUM_DEVICES in annotations and not (has_fraction or has_memory):
        return (
            "cannot request multiple fractional devices without specifying fraction portion "
            "or gpu-memory"
        )
    if has_memory:
        written = annotations[GPU_MEMORY]
        if not re.fullmatch(r"[0-9]+", written) or int(written) == 0:
            return "gpu-memory annotation value must be a positive integer greater than 0"
    if has_fraction:
        try:
            value = float(annotations[GPU_FRACTION])
        except ValueError:
            value = -1.0
        if not 0 < value < 1:
            return "gpu-fraction annotation value must be a positive number smaller than 1.0"
    if GPU_FRACTION_NUM_DEVICES in annotations:
        written = annotations[GPU_FRACTION_NUM_DEVICES]
        if not re.fullmatch(r"[0-9]+", written) or int(written) == 0:
            return "fraction count annotation value must be a positive integer greater than 0"
    return None


def is_scheduled_by_kai(pod: Mapping[str, Any], scheduler_name: str = "kai-scheduler") -> bool:
    """pkg/podgrouper/pod_controller.go L91-93 (its scheduler's pods only), and
    pkg/scheduler/api/pod_info/pod_info.go L481-482, L585-588: a pod with a nodeName is
    taken for Bound, and only Pending pods are allocated."""
    spec = pod.get("spec", {})
    return spec.get("schedulerName") == scheduler_name and not spec.get("nodeName")


def calc_pod_group_queue(top_owner_labels: Mapping[str, str], pod_labels: Mapping[str, str]) -> str:
    """pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go L134-147 (the
    `project` label fallback of L149-166 left out: the pods here carry none)."""
    if QUEUE_LABEL in top_owner_labels:
        return top_owner_labels[QUEUE_LABEL]
    if QUEUE_LABEL in pod_labels:
        return pod_labels[QUEUE_LABEL]
    return DEFAULT_QUEUE
