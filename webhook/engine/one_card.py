"""A pod whose shares must all fit on one card, counted as the scheduler counts a pod.

Where a backend puts every share of a pod on one card (the VRAM resource of a one-card node),
a pod whose shares add up to more than that card stays Pending for ever. The scheduler counts
what a pod holds at once: its main containers and the sidecars beside them (init containers
with `restartPolicy: Always`), or, while an init container runs, that one and the sidecars
started before it; the pod needs the largest of these.
"""

from __future__ import annotations

from collections.abc import Sequence

from webhook.engine.findings import Violation
from webhook.engine.shares import SizedShare


def held_at_once(shares: Sequence[SizedShare]) -> tuple[int, tuple[SizedShare, ...]]:
    """The MiB the pod's shares hold at its fullest moment, and the shares held then."""
    init = sorted(
        (s for s in shares if s.intent.container.kind == "initContainers"),
        key=lambda s: s.intent.container.index,
    )
    main = tuple(s for s in shares if s.intent.container.kind == "containers")
    sidecars: tuple[SizedShare, ...] = ()
    peak: tuple[SizedShare, ...] = ()
    for share in init:
        if share.intent.container.is_sidecar:
            sidecars = (*sidecars, share)
            moment = sidecars
        else:
            moment = (*sidecars, share)
        if _mib(moment) > _mib(peak):
            peak = moment
    running = (*sidecars, *main)
    if _mib(running) >= _mib(peak):
        peak = running
    return _mib(peak), peak


def over_one_card(shares: Sequence[SizedShare]) -> Violation | None:
    """A violation when the pod's shares can never fit on the one card they must share."""
    if len(shares) < 2:
        return None  # one share is checked against the card when it is sized
    total, held = held_at_once(shares)
    model = shares[0].model
    if total <= model.usable_mib:
        return None
    parts = " + ".join(f"{share.intent.container.label} {share.mib}" for share in held)
    return Violation(
        "shares-exceed-card",
        f"the pod's shares add up to {total} MiB at once ({parts}), more than a "
        f"{model.product} has ({model.usable_mib} MiB), and they must share one card: no node "
        "can ever hold the pod; ask for less in each container",
    )


def _mib(shares: Sequence[SizedShare]) -> int:
    return sum(share.mib for share in shares)
