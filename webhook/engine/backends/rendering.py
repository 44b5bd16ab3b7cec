"""What a sharing backend makes of a pod's shares, as data: the engine writes it into the
patch when mutating, and checks the stored object against it when validating.

A backend is a small class behind one interface (`ShareBackend`): it may read its own
dialect from a container (`read_native`), refuse what its system cannot give (`check`),
and says what the pod must carry (`render`). Nothing in a backend touches a patch. A new
backend is a module of its own plus its name in the registry (`__init__.py`) and, where it
has settings or resources of its own, in the policy model, schema and loader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.pod_spec import Container, PodView
from webhook.engine.share_record import NO_RECORD, ShareRecord
from webhook.engine.shares import SizedShare
from webhook.policy.model import HardLimit, Sharing

_EMPTY: Mapping[str, str] = MappingProxyType({})
# The scheduler a pod runs under when it names none: a backend's own may replace it.
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True)
class ClaimRendering:
    """A share given as a ResourceClaim made from a template (DRA): the name the pod and the
    container know the claim by, and the ResourceClaimTemplate it is made from, whole but for
    its namespace (the object's own)."""

    name: str
    template_name: str
    template: Mapping[str, Any]


# Made for every pod judged: slots rather than frozen, whose __init__ costs more.
@dataclass(slots=True)
class ContainerRendering:
    """The limits one container takes for its share (requests, where it has some, equal)."""

    resources: Mapping[str, str]
    # How messages say what the share became; the resources as written where not given.
    described: str | None = None
    # The resources nodes advertise, which a taint may guard; all of them where not given.
    node_resources: tuple[str, ...] | None = None
    claim: ClaimRendering | None = None

    @property
    def tolerated(self) -> tuple[str, ...]:
        return tuple(self.resources) if self.node_resources is None else self.node_resources

    @property
    def text(self) -> str:
        if self.described is not None:
            return self.described
        return ", ".join(f"{name}={amount}" for name, amount in self.resources.items())


@dataclass(slots=True)
class Rendering:
    """Per container (by name) the resources of its share, and what the pod carries for them:
    annotations set as given, labels set only where the pod has none of that key (a pod's own
    queue stays), and the scheduler that gives the shares."""

    containers: Mapping[str, ContainerRendering]
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    default_labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    scheduler_name: str | None = None


@dataclass(frozen=True)
class NativeRead:
    """A container written in the backend's own dialect: the resources its share takes, read
    here rather than as whole GPUs (or left as written, for a form this product does not
    size), and what is wrong with them."""

    claimed: frozenset[str]
    violations: tuple[Violation, ...] = ()


@dataclass
class ShareBackend:
    """The default of every hook; each backend overrides the ones its system needs."""

    sharing: Sharing
    policy_name: str
    inventory: MigInventory = NO_INVENTORY
    # What the webhook wrote on the pod before (a scheduler it set is no conflict).
    record: ShareRecord = NO_RECORD

    def read_native(self, container: Container) -> NativeRead | None:
        return None

    def read_pod(self, pod: PodView) -> list[Violation]:
        return []

    def per_card_shares(
        self, shares: list[ShareIntent], whole: list[WholeGpu]
    ) -> tuple[list[ShareIntent], list[WholeGpu]]:
        """Whole GPUs that the backend reads, beside an amount of memory in the same container,
        as that amount on each of them (HAMi's form): taken out of `whole`, and given to the
        share as its `cards`. Elsewhere a container cannot have both."""
        return shares, whole

    def check_pod(
        self, pod: PodView, shares: Sequence[ShareIntent], whole: Sequence[WholeGpu]
    ) -> list[Violation]:
        """What the backend's own admission or scheduler refuses of a pod that asks for GPUs,
        or would take and never give: checked before any share is sized."""
        return []

    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        return []

    def granted(self, share: SizedShare) -> SizedShare:
        """The share as the backend will enforce it, where that differs from what was sized
        (HAMi's whole percent): what the container's env is told."""
        return share

    def limit_mib(self, share: SizedShare) -> int | None:
        """The memory a hard limit holds the container to, where it is not the share itself
        (KAI's isolator rounds the share to a hundredth of the card): for the record."""
        return None

    def seen_mib(self, share: SizedShare) -> int:
        """The device memory a process of the share's container sees, of which frameworks
        take their fraction: the whole card, or under HAMi-core its limit (it reports the limit
        as the device's total)."""
        if self.sharing.hard_limit is HardLimit.HAMI_CORE:
            return self.limit_mib(share) or share.mib
        return share.model.memory_mib

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        raise NotImplementedError


def scheduler_conflict(
    pod: PodView, wanted: str, why: str, record: ShareRecord = NO_RECORD
) -> list[Violation]:
    """A pod that names another scheduler than the one its share needs (the default one, and
    one the webhook set for an earlier policy, may be replaced)."""
    present = pod.scheduler_name()
    if present in (None, DEFAULT_SCHEDULER, wanted, record.scheduler_name):
        return []
    return [
        Violation(
            "scheduler-conflict",
            f'schedulerName "{present}" cannot give a share of a GPU: {why} gives it through '
            f'"{wanted}"; remove schedulerName from the pod, or write "{wanted}"',
        )
    ]


def node_assigned(pod: PodView, backend: str, consequence: str) -> list[Violation]:
    """A pod that names its node: no scheduler places it, so no share of a card is counted."""
    node = pod.node_name()
    if node is None:
        return []
    return [
        Violation(
            "node-assigned",
            f'spec.nodeName "{node}" binds the pod to a node past every scheduler, and '
            f"{backend} gives a GPU only through its scheduler ({consequence}): remove "
            "nodeName, and choose the node with a nodeSelector on its kubernetes.io/hostname "
            "label",
        )
    ]


def one_container(shares: Sequence[SizedShare], backend: str, why: str) -> list[Violation]:
    if len(shares) <= 1:
        return []
    names = ", ".join(share.intent.container.label for share in shares)
    return [
        Violation(
            "one-share-per-pod",
            f"{names} each ask for a share of a GPU, and {backend} gives a share to one "
            f"container of a pod ({why}): split them into pods, or ask in one container",
        )
    ]
