"""The `dra` block of a DRA pool, read into `DraSettings`, with what a driver would refuse of
it said at load time rather than on a node when the first pod starts.

NVIDIA's driver is the one whose opaque configuration is checked here, as its own code checks
it (dra-driver-nvidia-gpu 95932046: api/nvidia.com/resource/v1beta1 sharing.go and validate.go,
cmd/gpu-kubelet-plugin/device_state.go). A share is consumable capacity, which needs the
driver's ConsumableShares; with them on, the driver refuses MPS when it prepares the claim, and
without them every claim takes a whole GPU of its own (MPS then shares a GPU only among the
containers of one claim). So MPS is refused here, with that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.field_paths import FieldPath
from webhook.k8s_names import is_dns_subdomain
from webhook.policy.model import Backend, DraAlternative, DraChoice, DraSettings, GpuModel

Report = Callable[[FieldPath, str], None]

NVIDIA_DRIVER = "gpu.nvidia.com"
NVIDIA_CONFIG_API = "resource.nvidia.com/v1beta1"
# The MIG DeviceClass of NVIDIA's driver, which the MIG alternative asks where it names none.
NVIDIA_MIG_CLASS = "mig.nvidia.com"
_INTERVALS = ("Default", "Short", "Medium", "Long")
# The DeviceClasses NVIDIA's driver installs (its chart's deviceclass-*.yaml), and HAMi's.
NVIDIA_CLASSES = frozenset({"gpu.nvidia.com", NVIDIA_MIG_CLASS, "vfio.gpu.nvidia.com"})
HAMI_CLASS = "hami-core-gpu.project-hami.io"


def read_dra(
    block: Mapping[str, Any],
    backend: Backend,
    models: Mapping[str, GpuModel],
    report: Report,
    base: FieldPath,
) -> DraSettings | None:
    settings = block.get("dra")
    if settings is None:
        if backend is Backend.DRA:
            report(base, "the DRA backend needs dra.deviceClassName, the class a share asks of")
        return None
    path = (*base, "dra")
    if backend is not Backend.DRA:
        report(path, f"dra is read by the DRA backend only, and this pool's is {backend.value}")
    device_class = settings["deviceClassName"]
    _check_name(device_class, (*path, "deviceClassName"), "DeviceClass", report)
    config = settings.get("config")
    if config is not None:
        _check_name(config["driver"], (*path, "config", "driver"), "driver", report)
        if config["driver"] == NVIDIA_DRIVER:
            for where, problem in nvidia_config_problems(config["parameters"]):
                report((*path, "config", "parameters", *where), problem)
    choices = _first_available(settings, device_class, models, report, path)
    return DraSettings(
        device_class_name=device_class,
        memory_capacity=settings.get("memoryCapacity", DraSettings.memory_capacity),
        cores_capacity=settings.get("coresCapacity"),
        request_step_mib=settings.get("requestStepMiB", DraSettings.request_step_mib),
        selectors=tuple(settings.get("selectors", ())),
        config=config,
        first_available=choices,
        attribute_domain=settings.get("attributeDomain", DraSettings.attribute_domain),
    )


def hami_core_problems(dra: DraSettings) -> list[str]:
    """HAMi-core holds a share only where HAMi's driver gives the device; NVIDIA's classes
    enforce nothing (its kubelet plugin never reads the consumed capacity)."""
    classes = {dra.device_class_name, *(c.device_class_name for c in dra.first_available)}
    nvidia = sorted(name for name in classes if name in NVIDIA_CLASSES)
    if not nvidia:
        return []
    return [
        f"HAMiCore holds a share only on HAMi's driver, and {', '.join(nvidia)} is NVIDIA's, "
        "which holds no process to its consumable memory: write hardLimit: None, or ask "
        f"{HAMI_CLASS}"
    ]


def _first_available(
    settings: Mapping[str, Any],
    device_class: str,
    models: Mapping[str, GpuModel],
    report: Report,
    path: FieldPath,
) -> tuple[DraChoice, ...]:
    entries: Sequence[Mapping[str, Any]] = settings.get("firstAvailable", ())
    choices: list[DraChoice] = []
    for index, entry in enumerate(entries):
        kind = DraAlternative(entry["kind"])
        where = (*path, "firstAvailable", index)
        if any(choice.kind is kind for choice in choices):
            report((*where, "kind"), f"{kind.value} is listed twice")
        default_class = NVIDIA_MIG_CLASS if kind is DraAlternative.MIG else device_class
        named = entry.get("deviceClassName", default_class)
        _check_name(named, (*where, "deviceClassName"), "DeviceClass", report)
        if kind is DraAlternative.MIG and not any(m.mig_profiles for m in models.values()):
            report(
                (*where, "kind"),
                "a MIG alternative needs migProfiles on the pool's models, to choose a profile",
            )
        choices.append(DraChoice(kind, named, tuple(entry.get("selectors", ()))))
    if choices and not any(choice.kind is DraAlternative.SHARE for choice in choices):
        report(
            (*path, "firstAvailable"),
            "list Share among the alternatives: it is the share the pod asked for",
        )
    return tuple(choices)


def _check_name(name: str, where: FieldPath, what: str, report: Report) -> None:
    if not is_dns_subdomain(name):
        report(
            where,
            f"{name!r} is not a {what} name: a DNS subdomain (lowercase letters, digits, '-' "
            "and '.', alphanumeric at both ends, at most 253 characters)",
        )


def _unknown_fields(
    block: Mapping[str, Any], known: tuple[str, ...], where: FieldPath
) -> list[tuple[FieldPath, str]]:
    """Fields the driver's strict decoding refuses (api.go: a GpuConfig is decoded strictly)."""
    return [
        ((*where, name), f'unknown field "{name}": NVIDIA\'s driver reads {", ".join(known)}')
        for name in block
        if name not in known
    ]


def nvidia_config_problems(parameters: Mapping[str, Any]) -> list[tuple[FieldPath, str]]:
    """What NVIDIA's driver refuses of a GpuConfig given to a consumable share, by field."""
    if parameters.get("apiVersion") != NVIDIA_CONFIG_API or parameters.get("kind") != "GpuConfig":
        return [
            (
                (),
                f"NVIDIA's driver reads a GpuConfig of {NVIDIA_CONFIG_API} for a full GPU: "
                "write apiVersion and kind so",
            )
        ]
    unknown = _unknown_fields(parameters, ("apiVersion", "kind", "sharing"), ())
    sharing = parameters.get("sharing")
    if unknown or sharing is None:
        return unknown
    if not isinstance(sharing, Mapping):
        return [(("sharing",), "must be an object")]
    unknown = _unknown_fields(sharing, ("strategy", "timeSlicingConfig", "mpsConfig"), ("sharing",))
    if unknown:
        return unknown
    strategy = sharing.get("strategy")
    if strategy == "MPS" or "mpsConfig" in sharing:
        return [
            (
                ("sharing",),
                "MPS cannot hold a share of a DRA claim: NVIDIA's driver refuses MPS while "
                'consumable shares are on (device_state.go: "MPS sharing is not supported when '
                "consumable shares is enabled\"), and without them each pod's claim takes a "
                "whole GPU; write strategy TimeSlicing, or leave sharing out",
            )
        ]
    if strategy != "TimeSlicing":
        return [(("sharing", "strategy"), f"unknown GPU sharing strategy {strategy!r}")]
    slicing = sharing.get("timeSlicingConfig")
    if slicing is None:
        return []
    if not isinstance(slicing, Mapping) or "interval" not in slicing:
        # The driver fills in the interval only where the whole block is left out, and takes
        # an empty block for a nil interval, which stops its plugin (gpuconfig.go L50-56).
        return [
            (
                ("sharing", "timeSlicingConfig"),
                "write interval (Default, Short, Medium or Long), or leave timeSlicingConfig out",
            )
        ]
    unknown = _unknown_fields(slicing, ("interval",), ("sharing", "timeSlicingConfig"))
    if unknown:
        return unknown
    interval = slicing["interval"]
    if interval not in _INTERVALS:
        return [
            (
                ("sharing", "timeSlicingConfig", "interval"),
                f"unknown time-slice interval {interval!r}: one of {', '.join(_INTERVALS)}",
            )
        ]
    return []
