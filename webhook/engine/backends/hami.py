"""The HAMi backend: a share is `nvidia.com/gpu: 1` (or the count of cards the container
writes beside an amount of memory) with `nvidia.com/gpumem` (MiB, on each card) or
`nvidia.com/gpumem-percentage` (whole percent of the card), and optionally
`nvidia.com/gpucores`, under the names the HAMi chart configures.

HAMi's own webhook fails open and reads these only as container resources, by
`Quantity.AsInt64`: a percentage of 99.1 is not given as written, memory written as `4Gi`
(over 2^31) is dropped without a word, and the same names written as pod annotations are
ignored. Here the percentage and the annotations are refused with the form that works, and
memory with a binary suffix is rewritten into MiB. A pod already written in HAMi's dialect
is checked, not rewritten: cards with a memory amount read as a share (it gets the policy's
env and placement); a share as a percentage is left as written. What HAMi's webhook denies
(a privileged container, a pod that names its node) is refused here first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from webhook.engine.backends.rendering import (
    DEFAULT_SCHEDULER,
    ContainerRendering,
    NativeRead,
    Rendering,
    ShareBackend,
    node_assigned,
    scheduler_conflict,
)
from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.pod_spec import Container, PodView
from webhook.engine.shares import SizedShare
from webhook.policy.model import HamiSettings
from webhook.quantity import plain_int, quantity_or_none

# The scheduler HAMi's chart names (values.yaml `schedulerName`), where the policy names none.
HAMI_CHART_SCHEDULER = "hami-scheduler"


@dataclass
class HamiBackend(ShareBackend):
    # Each share's percent, worked out once for check(), granted() and render().
    _percents: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def percent(self, share: SizedShare) -> int:
        if id(share) not in self._percents:
            self._percents[id(share)] = self._percent(share)
        return self._percents[id(share)]

    def _percent(self, share: SizedShare) -> int:
        """The share in whole percent of the card, rounded down so it never exceeds it: of
        the fraction asked where there is one (its MiB are rounded already), and the percent
        the webhook wrote where the share is read back from it, so that it never drifts."""
        intent = share.intent
        hami = self.sharing.hami
        given = self.record.given_of(intent.container.name, self.sharing.vram_resource)
        written = plain_int(given.get(hami.percentage_resource)) if intent.recorded else None
        if written is not None:
            return written
        model = share.model
        asked = intent.fraction * model.usable_mib if intent.fraction is not None else share.mib
        return int(Fraction(asked) * 100 / model.memory_mib)

    def granted(self, share: SizedShare) -> SizedShare:
        """In whole percent, HAMi caps the container at that percent of the card: the share's
        env says so too, so that a framework's own cap never sits above HAMi's."""
        if self.sharing.hami.memory != "Percentage":
            return share
        mib = share.model.memory_mib * self.percent(share) // 100
        units = mib // self.sharing.mib_per_unit
        return replace(share, units=units, mib=units * self.sharing.mib_per_unit)

    def read_native(self, container: Container) -> NativeRead | None:
        hami = self.sharing.hami
        present = {
            name
            for name in (*hami.resources, hami.count_resource)
            if name in container.limits or name in container.requests
        }
        if not present & set(hami.resources):
            return None
        violations = [
            violation
            for name in (hami.percentage_resource, hami.cores_resource)
            if name in present
            for violation in _whole_percent(container, name)
        ]
        count = quantity_or_none(container.limits.get(hami.count_resource, 1))
        if count is None or count.denominator != 1:
            # A fraction of a card (kubectl apply may put one back beside the memory written
            # for it): the count is read as any GPU count, and the memory as any amount.
            claimed = present & {hami.percentage_resource, hami.cores_resource}
            return NativeRead(frozenset(claimed), tuple(violations))
        by_memory = hami.memory_resource in present
        if by_memory and count >= 1 and hami.percentage_resource not in present:
            # Cards and an amount of memory on each: the share this backend writes, read as one
            # (the count as whole GPUs, which per_card_shares gives the share).
            claimed = present - {hami.memory_resource, hami.count_resource}
            return NativeRead(frozenset(claimed), tuple(violations))
        if not by_memory and hami.percentage_resource not in present:
            # Cores alone: a whole card with its cores capped, counted as a whole GPU.
            return NativeRead(frozenset({hami.cores_resource}), tuple(violations))
        # A percentage: checked, and left as written.
        return NativeRead(frozenset(present), tuple(violations))

    def per_card_shares(
        self, shares: list[ShareIntent], whole: list[WholeGpu]
    ) -> tuple[list[ShareIntent], list[WholeGpu]]:
        """HAMi reads `nvidia.com/gpu: N` beside an amount of memory as that memory on each of
        N cards (pkg/device/nvidia/device.go, v2.10.0: one `Memreq` for `Nums` cards, L520-600;
        Fit charges it to each, L715-876). The count is read as the container holds it, the
        webhook's own included (a share it wrote before, which kubectl apply sends back beside
        the user's memory)."""
        count = self.sharing.hami.count_resource
        taken: set[tuple[str, int]] = set()
        per_card: list[ShareIntent] = []
        for share in shares:
            cards = _whole_count(share.container.limits.get(count))
            if cards is None or share.fraction is not None:
                per_card.append(share)
                continue
            per_card.append(replace(share, cards=cards))
            taken.add(_key(share.container))
        left = [gpu for gpu in whole if gpu.resource != count or _key(gpu.container) not in taken]
        return per_card, left

    def _cores_are_ours(self, share: SizedShare) -> bool:
        """Cores a user wrote beside the share stay theirs; those the webhook wrote follow it."""
        container = share.intent.container
        cores = self.sharing.hami.cores_resource
        written = cores in container.limits or cores in container.requests
        given = self.record.given_of(container.name, self.sharing.vram_resource)
        return not written or cores in given

    def check_pod(
        self, pod: PodView, shares: Sequence[ShareIntent], whole: Sequence[WholeGpu]
    ) -> list[Violation]:
        """What HAMi's webhook denies (pkg/scheduler/webhook.go, v2.10.0 L99-112) of a pod with
        a HAMi resource, in any form and any amount (`nvidia.com/gpu: 0` too), that it does not
        leave to another scheduler: a container of the pod that is privileged, and a pod that
        names its node."""
        hami = self.sharing.hami
        if not any(_has_hami_resource(container, hami) for container in pod.containers):
            return []
        ours = hami.scheduler_name or HAMI_CHART_SCHEDULER
        if pod.scheduler_name() not in (None, "", DEFAULT_SCHEDULER, ours):
            return []  # HAMi's webhook lets such a pod pass unchecked (L64-69)
        found = [
            Violation(
                "privileged-container",
                f"{container.label} is privileged, and HAMi denies every pod with a GPU in which "
                f'a container is ("container {container.name} is privileged"): a privileged '
                "container sees every card of its node, past any share; drop privileged, or "
                "run it in a pod without GPUs",
            )
            for container in pod.containers
            if container.privileged
        ]
        found += node_assigned(pod, "HAMi", 'its webhook denies it: "pod has node assigned"')
        return found

    def read_pod(self, pod: PodView) -> list[Violation]:
        hami = self.sharing.hami
        return [
            Violation(
                "hami-annotation",
                f"annotation {name} is not read by HAMi, which takes it only from a "
                f"container's resources.limits: move it there",
            )
            for name in (*hami.resources, hami.count_resource)
            if name in pod.annotations
        ]

    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        hami = self.sharing.hami
        found: list[Violation] = []
        if hami.scheduler_name is not None:
            why = f'policy "{self.policy_name}"'
            found += scheduler_conflict(pod, hami.scheduler_name, why, self.record)
        if hami.memory == "Percentage" or hami.cores:
            found += [
                Violation(
                    "share-too-small",
                    f"{share.intent.container.label}: {share.intent.asked} ({share.mib} MiB) is "
                    f"less than 1% of a {share.model.product}, the least HAMi gives",
                )
                for share in shares
                if self.percent(share) == 0
            ]
        return found

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        hami = self.sharing.hami
        containers: dict[str, ContainerRendering] = {}
        for share in shares:
            resources = {hami.count_resource: str(share.intent.cards)}
            if hami.memory == "Percentage":
                resources[hami.percentage_resource] = str(self.percent(share))
            else:
                resources[hami.memory_resource] = str(share.mib)
            if hami.cores and self._cores_are_ours(share):
                resources[hami.cores_resource] = str(self.percent(share))
            # Only the count is a node resource; HAMi's scheduler reads the others.
            containers[share.intent.container.name] = ContainerRendering(
                resources, node_resources=(hami.count_resource,)
            )
        return Rendering(containers, scheduler_name=hami.scheduler_name)


def _key(container: Container) -> tuple[str, int]:
    return container.kind, container.index


def _whole_count(written: object) -> int | None:
    amount = quantity_or_none(written)
    if amount is None or amount.denominator != 1 or amount < 1:
        return None
    return int(amount)


def _has_hami_resource(container: Container, hami: HamiSettings) -> bool:
    """What HAMi's webhook counts as asking it for a GPU: one of its names in limits, or the
    count in requests (device.go L398-450)."""
    names = (*hami.resources, hami.count_resource)
    return any(name in container.limits for name in names) or (
        hami.count_resource in container.requests
    )


def _whole_percent(container: Container, name: str) -> list[Violation]:
    found: list[Violation] = []
    for field_name, amounts in (("limits", container.limits), ("requests", container.requests)):
        if name not in amounts:
            continue
        written = amounts[name]
        amount = quantity_or_none(written)
        if amount is None or amount.denominator != 1 or not 0 <= amount <= 100:
            found.append(
                Violation(
                    "whole-percent",
                    f'{container.label}: {name} {field_name} "{written}" is not a whole percent '
                    "from 0 to 100, the only values HAMi gives as written: write the percent you "
                    f'mean, such as "{max(0, min(100, int(amount or 0)))}"',
                )
            )
            break
    return found
