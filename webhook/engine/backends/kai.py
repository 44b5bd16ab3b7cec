"""The KAI backend (KAI Scheduler): a share is the pod annotation `gpu-fraction` (of one card,
strictly between 0 and 1) or `gpu-memory` (MiB, plain digits), `gpu-fraction-container-name`
where it is not the first container's, `schedulerName: kai-scheduler`, and the queue label.
No GPU resource stays in the spec: KAI refuses a fraction beside an `nvidia.com/gpu` limit.
A pod carries one such annotation, so one container of a pod may have a share."""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction

from webhook.engine.backends.rendering import (
    ContainerRendering,
    Rendering,
    ShareBackend,
    one_container,
    scheduler_conflict,
)
from webhook.engine.findings import Violation
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare
from webhook.policy.defaults import (
    FRACTION_ANNOTATION,
    FRACTION_CONTAINER_ANNOTATION,
    MEMORY_ANNOTATION,
)
from webhook.policy.model import KAI_QUEUE_LABEL
from webhook.quantity import format_decimal

_FRACTION_PLACES = 6


class KaiBackend(ShareBackend):
    def check(self, shares: Sequence[SizedShare], pod: PodView) -> list[Violation]:
        kai = self.sharing.kai
        assert kai is not None, "the loader gives the KAI backend its settings"
        why = f'policy "{self.policy_name}"'
        return [
            *one_container(shares, "KAI Scheduler", "its gpu-fraction annotation is the pod's"),
            *scheduler_conflict(pod, kai.scheduler_name, why, self.record),
        ]

    def render(self, shares: Sequence[SizedShare], pod: PodView) -> Rendering:
        kai = self.sharing.kai
        assert kai is not None, "the loader gives the KAI backend its settings"
        annotations: dict[str, str] = {}
        for share in shares:
            intent = share.intent
            if intent.fraction is not None:
                annotations[FRACTION_ANNOTATION] = _kai_fraction(intent.written, intent.fraction)
            else:
                annotations[MEMORY_ANNOTATION] = str(share.mib)
            named = FRACTION_CONTAINER_ANNOTATION in pod.annotations
            if named or intent.container is not pod.first_container():
                # KAI gives the share to the container this names: the share's own.
                annotations[FRACTION_CONTAINER_ANNOTATION] = intent.container.name
        return Rendering(
            {share.intent.container.name: ContainerRendering({}) for share in shares},
            annotations=annotations,
            default_labels={KAI_QUEUE_LABEL: kai.queue},
            scheduler_name=kai.scheduler_name,
        )


# What KAI's binder parses (Go's ParseFloat): a plain decimal, which "250m" is not.
_PLAIN_DECIMAL = re.compile(r"^0?\.[0-9]+$")


def _kai_fraction(written: str, fraction: Fraction) -> str:
    """The fraction as KAI reads it: the user's own text where it is a plain decimal, else
    the decimal it stands for (`250m` is written `0.25`)."""
    if _PLAIN_DECIMAL.match(written):
        return written
    return format_decimal(fraction, _FRACTION_PLACES)
