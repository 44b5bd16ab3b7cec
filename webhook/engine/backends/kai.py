"""The KAI backend (KAI Scheduler): a share is the pod annotation `gpu-fraction` (of one card,
strictly between 0 and 1, in hundredths) or `gpu-memory` (MiB, plain digits),
`gpu-fraction-container-name` where it is not the first container's, `schedulerName:
kai-scheduler`, and the queue label. No GPU resource stays in the spec: KAI refuses a fraction
beside an `nvidia.com/gpu` limit. A pod carries one such annotation, so one container of a pod
may have a share. The container is told what KAI holds for it (kai_portion.py), and under its
HAMi-core isolator sees the isolator's cap as its card."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from webhook.engine.backends.kai_portion import (
    fraction_portion,
    fraction_reserved_mib,
    has_places_kai_drops,
    isolator_limit_mib,
    kept_fraction,
    memory_portion,
    scheduling_memory,
)
from webhook.engine.backends.rendering import (
    ContainerRendering,
    Rendering,
    ShareBackend,
    node_assigned,
    one_container,
    scheduler_conflict,
)
from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare
from webhook.policy.defaults import (
    FRACTION_ANNOTATION,
    FRACTION_CONTAINER_ANNOTATION,
    FRACTION_DEVICES_ANNOTATION,
    MEMORY_ANNOTATION,
)
from webhook.policy.model import KAI_QUEUE_LABEL, HardLimit
from webhook.quantity import format_decimal


class KaiBackend(ShareBackend):
    def check_pod(
        self, pod: PodView, shares: Sequence[ShareIntent], whole: Sequence[WholeGpu]
    ) -> list[Violation]:
        if not shares:
            return []  # whole GPUs are not sent to KAI
        # kai-scheduler takes a pod with a nodeName for bound (pkg/scheduler/api/pod_info/
        # pod_info.go L481-482), and its binder skips it (bindrequest_controller.go L139-143).
        consequence = "it takes such a pod for placed, holds no share for it, and never makes "
        consequence += "the ConfigMap its container needs to start"
        return [*node_assigned(pod, "KAI Scheduler", consequence), *_several_devices(pod)]

    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        kai = self.sharing.kai
        assert kai is not None, "the loader gives the KAI backend its settings"
        why = f'policy "{self.policy_name}"'
        return [
            *one_container(shares, "KAI Scheduler", "its gpu-fraction annotation is the pod's"),
            *scheduler_conflict(pod, kai.scheduler_name, why, self.record),
            *(violation for share in shares if (violation := self._unkept(share))),
            *self._queue_conflict(pod),
        ]

    def _owners_queue(self, pod: PodView) -> str | None:
        """The queue KAI reads first: the label of the pods' top owner (KAI-Scheduler
        default_grouper.go L134-147), where this object is that owner."""
        queue = (pod.owner_labels or {}).get(KAI_QUEUE_LABEL)
        return queue if isinstance(queue, str) else None

    def _queue(self, pod: PodView) -> str:
        """The queue label the pods get: their top owner's where this object is it; behind an
        owner the webhook cannot see, the one they carry (written from their owner's template,
        or by their user), else the policy's."""
        owners = self._owners_queue(pod)
        if owners is not None:
            return owners
        present = pod.labels().get(KAI_QUEUE_LABEL) if pod.owner_labels is None else None
        kai = self.sharing.kai
        assert kai is not None, "the loader gives the KAI backend its settings"
        return present if isinstance(present, str) else kai.queue

    def _queue_conflict(self, pod: PodView) -> list[Violation]:
        owners = self._owners_queue(pod)
        templates = pod.labels().get(KAI_QUEUE_LABEL)
        if owners == "":
            return [
                Violation(
                    "queue-conflict",
                    f"the workload's label {KAI_QUEUE_LABEL} is empty, and KAI takes it for the "
                    "name of its pods' queue, which no queue has: name a queue, or remove it",
                )
            ]
        if owners is None or templates in (None, owners, self.record.labels.get(KAI_QUEUE_LABEL)):
            return []
        return [
            Violation(
                "queue-conflict",
                f'the workload\'s label {KAI_QUEUE_LABEL}: "{owners}" is the queue KAI gives its '
                f'pods, and their template names "{templates}", which KAI never reads: write '
                "the same queue in both, or keep the workload's alone",
            )
        ]

    def _unkept(self, share: SizedShare) -> Violation | None:
        """A share KAI would not give as asked: finer than a hundredth of a card (written by
        the user in KAI's own annotation), under one, or more memory than KAI counts a card."""
        intent = share.intent
        where = f"{intent.container.label}: {intent.asked}"
        if intent.fraction is None:
            most = scheduling_memory(share.model.memory_mib)
            if share.mib <= most:
                return None
            return Violation(
                "share-too-large",
                f"{where} is {share.mib} MiB, and KAI counts a {share.model.product} as "
                f"{most} MiB (its memory label floored to 100 MiB): ask for at most "
                f"{most // self.sharing.mib_per_unit} {self.sharing.unit}",
            )
        kept = kept_fraction(intent.fraction)
        if kept == 0:
            return Violation(
                "share-too-small",
                f"{where} is less than 0.01 of a GPU, the least KAI gives (it keeps two "
                'decimals, and gives "0.00" with no memory limit): ask for at least 0.01',
            )
        users = intent.source == "annotation" and not self._wrote(intent)
        if users and has_places_kai_drops(intent.fraction):
            above = format_decimal(kept + Fraction(1, 100), 2)
            return Violation(
                "fraction-places",
                f"{where} has more than two decimals, and KAI keeps two (it passes the share on "
                f'with "%.2f"): write "{format_decimal(kept, 2)}" or "{above}"',
            )
        if self.granted(share).units == 0:
            held = fraction_reserved_mib(kept, share.model.memory_mib)
            sharing = self.sharing
            return Violation(
                "share-too-small",
                f"{where} is given by KAI as {format_decimal(kept, 2)} of the card, {held} MiB "
                f"of a {share.model.product} as it counts it, less than 1 {sharing.unit} of "
                f"{sharing.vram_resource}: ask for a larger share",
            )
        return None

    def _wrote(self, intent: ShareIntent) -> bool:
        return self.record.annotations.get(intent.annotation) == intent.written

    def granted(self, share: SizedShare) -> SizedShare:
        """What kai-scheduler holds on the card: `gpu-memory` exactly, a fraction of the card's
        memory as it counts it, in hundredths."""
        fraction = share.intent.fraction
        if fraction is None:
            return share
        held = fraction_reserved_mib(kept_fraction(fraction), share.model.memory_mib)
        units = min(share.mib, held) // self.sharing.mib_per_unit
        return replace(share, units=units, mib=units * self.sharing.mib_per_unit)

    def limit_mib(self, share: SizedShare) -> int | None:
        """The cap of KAI's HAMi-core isolator, which KAI's own webhook writes into the
        container (as `CUDA_DEVICE_MEMORY_LIMIT` from a ConfigMap) once the pod is bound."""
        if self.sharing.hard_limit is not HardLimit.HAMI_CORE:
            return None
        return isolator_limit_mib(_portion(share), share.model.memory_mib)

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        kai = self.sharing.kai
        assert kai is not None, "the loader gives the KAI backend its settings"
        annotations: dict[str, str] = {}
        containers: dict[str, ContainerRendering] = {}
        for share in shares:
            intent = share.intent
            if intent.fraction is not None:
                written = (FRACTION_ANNOTATION, _kai_fraction(intent.written, intent.fraction))
            else:
                written = (MEMORY_ANNOTATION, str(share.mib))
            annotations[written[0]] = written[1]
            limit = self.limit_mib(share)
            described = None
            if limit is not None:
                described = f"{written[0]}={written[1]} (capped at {limit} MiB)"
            containers[intent.container.name] = ContainerRendering({}, described)
            named = FRACTION_CONTAINER_ANNOTATION in pod.annotations
            first = pod.first_container()
            if named or first is None or intent.container.path != first.path:
                # KAI gives the share to the container this names: the share's own.
                annotations[FRACTION_CONTAINER_ANNOTATION] = intent.container.name
        return Rendering(
            containers,
            annotations=annotations,
            default_labels={KAI_QUEUE_LABEL: self._queue(pod)},
            scheduler_name=kai.scheduler_name,
        )


def _several_devices(pod: PodView) -> list[Violation]:
    """KAI gives the share on each of `gpu-fraction-num-devices` cards; the webhook sizes the
    env and the record for one."""
    written = pod.annotations.get(FRACTION_DEVICES_ANNOTATION)
    if written is None or written == "1":
        return []
    return [
        Violation(
            "fraction-devices",
            f'annotation {FRACTION_DEVICES_ANNOTATION} "{written}" asks KAI for the share on '
            "several cards, and this webhook gives a share on one: remove the annotation, or "
            "ask for whole GPUs",
        )
    ]


# What KAI's binder parses (Go's ParseFloat): a plain decimal, which "250m" is not.
_PLAIN_DECIMAL = re.compile(r"^0?\.[0-9]+$")


def _kai_fraction(written: str, fraction: Fraction) -> str:
    """The fraction as KAI reads and keeps it: the user's own text where it is a plain decimal
    of hundredths, else the hundredths it stands for, rounded down (`250m` is written `0.25`,
    `0.125` `0.12`)."""
    kept = kept_fraction(fraction)
    if kept == fraction and _PLAIN_DECIMAL.match(written):
        return written
    return format_decimal(kept, 2)


def _portion(share: SizedShare) -> str:
    """The portion KAI passes on to its isolator for this share, as it prints it."""
    fraction = share.intent.fraction
    if fraction is None:
        return memory_portion(share.mib, share.model.memory_mib)
    return fraction_portion(kept_fraction(fraction))
