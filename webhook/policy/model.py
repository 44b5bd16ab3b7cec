"""The policy model: frozen, validated values that the admission engine reads.

A `Policy` is built only by the loader (or by tests) from a document that passed the schema and
the semantic checks, so the engine can trust every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from functools import cached_property
from types import MappingProxyType
from typing import Literal

from webhook.policy.label_selectors import LabelSelector
from webhook.policy.namespace_patterns import PROTECTED_NAMESPACE
from webhook.policy.scope import AdmissionTarget, Match, Scope

# What the NVIDIA device plugin calls a MIG device under the mixed strategy: <prefix><profile>.
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
# The resource Aliyun's gpushare device plugin advertises and its extender schedules.
GPUSHARE_RESOURCE = "aliyun.com/gpu-mem"
# KAI Scheduler's queue label (defaults.py holds the product's names; this module is below it).
KAI_QUEUE_LABEL = "kai.scheduler/queue"
# Every label a backend gives, and so every label the engine may read: under any policy, it
# takes away one that the record says an earlier policy gave.
BACKEND_LABELS = (KAI_QUEUE_LABEL,)

MemoryUnit = Literal["MiB", "GiB"]
MIB_PER_UNIT: Mapping[str, int] = MappingProxyType({"MiB": 1, "GiB": 1024})

Toleration = Mapping[str, object]


class Enforcement(Enum):
    """What a broken rule does: `Enforce` denies; `Warn` allows, with the denial as a warning
    and an audit annotation; `Audit` allows, with the audit annotation alone (and the
    metrics). Rewrites are made in every mode."""

    ENFORCE = "Enforce"
    WARN = "Warn"
    AUDIT = "Audit"


class FractionHandling(Enum):
    REWRITE = "Rewrite"
    DENY = "Deny"


@dataclass(frozen=True)
class GovernedResource:
    """A GPU resource name, or a family of them when it ends with `*`."""

    name: str
    fractions: FractionHandling = FractionHandling.DENY

    @property
    def is_family(self) -> bool:
        return self.name.endswith("*")

    def matches(self, resource_name: str) -> bool:
        if self.is_family:
            return resource_name.startswith(self.name[:-1])
        return resource_name == self.name


@dataclass(frozen=True)
class MigProfile:
    """A MIG profile of one GPU model: its name (`1g.10gb`) and the memory its instances
    really have, which is less than the name says."""

    name: str
    memory_mib: int


@dataclass(frozen=True)
class GpuModel:
    """A GPU model as GPU feature discovery labels it: product name and memory in MiB.
    `reserved_mib` is what the driver keeps for itself, which shares are not sized from."""

    product: str
    memory_mib: int
    reserved_mib: int = 0
    mig_profiles: tuple[MigProfile, ...] = ()
    # Other values of the model label that name this card (`Tesla-T4-SHARED`).
    aliases: tuple[str, ...] = ()

    @property
    def usable_mib(self) -> int:
        return self.memory_mib - self.reserved_mib


@dataclass(frozen=True)
class EnvTemplate:
    """A variable given to each container with a share. `unless_set` names variables that
    take its place when the container sets them; `merge_key`, the key of the one entry the
    webhook owns in a `key:value,...` list."""

    name: str
    value: str
    enforce: bool = False
    unless_set: tuple[str, ...] = ()
    # A `key:value` entry merged into a comma-separated list (PYTORCH_CUDA_ALLOC_CONF) rather
    # than the variable's whole value.
    merge_key: str | None = None
    # Other names the program reads the same setting under: where the container sets one of
    # them and not `name`, the value goes there (PYTORCH_ALLOC_CONF for PYTORCH_CUDA_ALLOC_CONF).
    also_named: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placement:
    """Tolerations and node selector entries given to one class of GPU pods."""

    resource_tolerations: bool = True
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


class MultiGpuNodes(Enum):
    """What a node with several cards advertises. Its VRAM is one number, so a share can be
    scheduled across the cards' sum even though it must fit on one of them."""

    SKIP = "Skip"
    SUM = "Sum"


@dataclass(frozen=True)
class NodePool:
    """The nodes whose VRAM the advertiser keeps in their status; `selector` None: none."""

    selector: LabelSelector | None = None
    multi_gpu: MultiGpuNodes = MultiGpuNodes.SKIP


class Backend(Enum):
    """The system that gives pods their share of a card, and so the dialect a share is
    written in (docs/backends/)."""

    EXTENDED_RESOURCE = "ExtendedResource"
    GPUSHARE = "Gpushare"
    HAMI = "HAMi"
    TIME_SLICING = "TimeSlicing"
    MIG = "MIG"
    KAI = "KAI"
    DRA = "DRA"


class HardLimit(Enum):
    """What stops a process from using more than its share, below the scheduler: a *hard*
    limit. `None`: nothing does, and the frameworks' own limits are only advisory."""

    NONE = "None"
    MPS = "MPS"  # the nodes run an MPS control daemon; the pinned limit is the share
    HAMI_CORE = "HAMiCore"  # HAMi-core in the container: CUDA_DEVICE_MEMORY_LIMIT
    MIG = "MIG"  # the MIG slice is the limit


class Framework(Enum):
    """A framework told its share through its own environment variables (frameworks.py)."""

    JAX = "JAX"
    PYTORCH = "PyTorch"
    CUPY = "CuPy"
    TENSORFLOW = "TensorFlow"


HamiMemory = Literal["MiB", "Percentage"]


@dataclass(frozen=True)
class HamiSettings:
    """HAMi's resource names (its chart's resourceName, resourceMem, resourceMemPercentage and
    resourceCores) and how a share is written in them."""

    count_resource: str = "nvidia.com/gpu"
    memory_resource: str = "nvidia.com/gpumem"
    percentage_resource: str = "nvidia.com/gpumem-percentage"
    cores_resource: str = "nvidia.com/gpucores"
    memory: HamiMemory = "MiB"
    cores: bool = False
    scheduler_name: str | None = None

    @property
    def resources(self) -> tuple[str, ...]:
        return (self.memory_resource, self.percentage_resource, self.cores_resource)


@dataclass(frozen=True)
class KaiSettings:
    queue: str
    scheduler_name: str = "kai-scheduler"


class DraAlternative(Enum):
    """One way a DRA claim may be met, tried in the order the policy lists them
    (`firstAvailable`): a MIG device of the smallest profile that holds the share, the share
    itself as consumable capacity, or a whole device."""

    MIG = "MIG"
    SHARE = "Share"
    WHOLE_GPU = "WholeGPU"


@dataclass(frozen=True)
class DraChoice:
    """An alternative with the DeviceClass it is asked of, and CEL selectors of its own."""

    kind: DraAlternative
    device_class_name: str
    selectors: tuple[str, ...] = ()


@dataclass(frozen=True)
class DraSettings:
    """How a share is asked of a DRA driver: one device of `device_class_name`, with
    `memory_capacity` (and `cores_capacity`, where set) as consumable capacity, rounded up to
    the driver's step; `config`, an opaque driver configuration put in the claim as written;
    `first_available`, the alternatives in order where there are several."""

    device_class_name: str
    memory_capacity: str = "memory"
    cores_capacity: str | None = None
    request_step_mib: int = 1
    selectors: tuple[str, ...] = ()
    config: Mapping[str, object] | None = None
    first_available: tuple[DraChoice, ...] = ()
    # The driver whose attributes the MIG alternative's selector reads (`profile`).
    attribute_domain: str = "gpu.nvidia.com"


@dataclass(frozen=True)
class Sharing:
    """How a share of a GPU is sized (against the pod's model) and written for the backend.
    `vram_resource` is the resource a user writes an amount of GPU memory in, counted in
    `unit`, whatever the backend; the ExtendedResource backend writes shares in it too."""

    vram_resource: str
    models: Mapping[str, GpuModel]
    unit: MemoryUnit = "MiB"
    model_label: str = "nvidia.com/gpu.product"
    default_model: str | None = None
    single_model_pool: bool = False
    placement: Placement = Placement()
    env: tuple[EnvTemplate, ...] = ()
    nodes: NodePool = NodePool()
    # The RuntimeClass pods with a share run under: with the VRAM resource instead of a GPU,
    # the device plugin gives them no card, and the NVIDIA runtime exposes one.
    runtime_class_name: str | None = None
    backend: Backend = Backend.EXTENDED_RESOURCE
    hami: HamiSettings = HamiSettings()
    # The device plugin's name for a shared replica (its `renameByDefault`).
    shared_resource: str = "nvidia.com/gpu.shared"
    kai: KaiSettings | None = None
    dra: DraSettings | None = None
    hard_limit: HardLimit = HardLimit.NONE
    # The frameworks whose limits are in `env` (rendered from frameworks.py).
    frameworks: tuple[Framework, ...] = ()
    # `models` left out: the pool takes every model, including one the catalogue lacks that
    # its nodes label with their memory (read where the server reads the nodes).
    every_model: bool = False

    @property
    def enforced(self) -> bool:
        """Whether something below the scheduler holds a process to its share."""
        return self.hard_limit is not HardLimit.NONE

    @property
    def advertised(self) -> bool:
        """Whether nodes must be given `vram_resource` by this product: no one else does."""
        return self.backend is Backend.EXTENDED_RESOURCE

    @property
    def reads_nodes(self) -> bool:
        """Whether the server reads the nodes for this policy: the MIG profiles they offer,
        or the memory of models the catalogue lacks, for a pool that takes every model."""
        return self.backend is Backend.MIG or self.every_model

    @cached_property
    def gives_labels(self) -> bool:
        """Whether this policy's backend gives a pod labels (KAI's queue), so that whether
        the pod has a labels map decides its patch."""
        return self.backend is Backend.KAI

    @cached_property
    def memory_resources(self) -> frozenset[str]:
        """The resources that hold an amount of memory in `unit`: the VRAM resource users write,
        and the backend's own where it has one (gpushare's, HAMi's, which is in MiB)."""
        if self.backend is Backend.GPUSHARE:
            return frozenset({self.vram_resource, GPUSHARE_RESOURCE})
        if self.backend is Backend.HAMI:
            return frozenset({self.vram_resource, self.hami.memory_resource})
        return frozenset({self.vram_resource})

    @cached_property
    def share_resources(self) -> frozenset[str]:
        """The resources a share may be written in, in this backend's dialect or as an amount."""
        names = set(self.memory_resources)
        if self.backend is Backend.HAMI:
            names.update(self.hami.resources)
        elif self.backend is Backend.TIME_SLICING:
            names.add(self.shared_resource)
        return frozenset(names)

    @property
    def mib_per_unit(self) -> int:
        return MIB_PER_UNIT[self.unit]

    def units_for(self, fraction: Fraction, model: GpuModel) -> int:
        """Whole units of VRAM for `fraction` of `model`, rounded down so that n pods that
        each ask for 1/n of a card fit on it."""
        return int(fraction * model.usable_mib // self.mib_per_unit)


@dataclass(frozen=True)
class Policy:
    name: str
    resources: tuple[GovernedResource, ...]
    sharing: Sharing | None = None
    whole_gpu: Placement = Placement()
    source: str = "<built-in>"
    source_line: int | None = None
    priority: int = 0
    match: Scope = field(default_factory=Scope)
    exclude: Scope | None = None
    enforcement: Enforcement = Enforcement.ENFORCE

    def may_apply_in(self, namespace: str) -> bool:
        """Whether an object in `namespace` could be matched at all, whatever its labels."""
        names = self.match.namespaces
        if names is None:
            return namespace != PROTECTED_NAMESPACE
        return names.matches(namespace)

    def applies_to(self, target: AdmissionTarget) -> Match:
        """Whether this policy's match holds and its exclusion does not; UNKNOWN when that
        depends on namespace labels the target does not have."""
        if self.match.namespaces is None and target.namespace == PROTECTED_NAMESPACE:
            return Match.NO
        matched = self.match.test(target)
        if matched is Match.NO or self.exclude is None:
            return matched
        excluded = self.exclude.test(target)
        if excluded is Match.YES:
            return Match.NO
        return Match.UNKNOWN if excluded is Match.UNKNOWN else matched

    @property
    def needs_namespace_labels(self) -> bool:
        return self.match.needs_namespace_labels or (
            self.exclude is not None and self.exclude.needs_namespace_labels
        )

    def governing(self, resource_name: str) -> GovernedResource | None:
        for resource in self.resources:
            if resource.matches(resource_name):
                return resource
        return None

    def is_vram(self, resource_name: str) -> bool:
        """Whether the resource holds an amount of GPU memory (see `Sharing.memory_resources`)."""
        return self.sharing is not None and resource_name in self.sharing.memory_resources

    def is_share_resource(self, resource_name: str) -> bool:
        return self.sharing is not None and resource_name in self.sharing.share_resources
