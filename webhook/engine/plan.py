"""The first pass over a pod: what its GPU requests mean under a policy, decided before
anything is written.

`plan_pod` reads the requests (in the forms users write, and in the backend's own dialect),
tells the shares the webhook wrote before from fresh ones by the record, chooses the GPU
model, sizes each share, lets the backend say what it makes of them, and plans the env. It
returns a `PodPlan`, or every rule the pod breaks. It touches no patch: `render.py` writes
the plan when mutating, and `/validate` checks the stored object against the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from webhook.engine.backends import backend_for
from webhook.engine.backends.rendering import ContainerRendering, Rendering, ShareBackend
from webhook.engine.env_plan import EnvChange, plan_env
from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.gpu_model import ModelChoice, choose_model
from webhook.engine.gpu_requests import read_gpu_requests
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.placement import (
    node_selector_conflicts,
    runtime_class_conflict,
    stale_selector_keys,
)
from webhook.engine.pod_spec import Container, PodView
from webhook.engine.share_record import ShareRecord
from webhook.engine.shares import SizedShare, size_share
from webhook.policy.frameworks import FRAMEWORK_HEADROOM_MIB
from webhook.policy.model import Policy, Sharing
from webhook.quantity import same_amount

ContainerKey = tuple[str, int]


@dataclass(slots=True)
class PlannedShare:
    sized: SizedShare
    rendering: ContainerRendering
    env: tuple[EnvChange, ...]
    # What the user wrote, as the record keeps it (the first pass's words on later passes).
    asked: str
    # The share as the backend holds it (HAMi's whole percent, KAI's hundredths), which the
    # record and the env say; and the cap of a hard limit where it is not that share.
    granted: SizedShare
    limit_mib: int | None = None

    @property
    def container(self) -> Container:
        return self.sized.intent.container


# Made for every pod judged: slots rather than frozen, whose __init__ costs more.
@dataclass(slots=True)
class PodPlan:
    pod: PodView
    policy: Policy
    record: ShareRecord
    whole: tuple[WholeGpu, ...] = ()
    # Shares the webhook gave before that whole GPUs now replace.
    stale: tuple[ShareIntent, ...] = ()
    shares: tuple[PlannedShare, ...] = ()
    choice: ModelChoice | None = None
    rendering: Rendering | None = None
    # nodeSelector keys the webhook set for an earlier placement and that go now.
    gone_selector: tuple[str, ...] = ()

    @property
    def sharing(self) -> Sharing:
        assert self.policy.sharing is not None, "a plan with shares has a sharing policy"
        return self.policy.sharing

    @property
    def why(self) -> str:
        kind = "shared GPUs" if self.shares else "whole GPUs"
        return f'policy "{self.policy.name}" for {kind}'


@dataclass
class _ShareIntents:
    """The shares a pod asks for, one per container, and the earlier shares of the webhook
    that a whole GPU now replaces (`stale`). `user_vram` holds VRAM the user wrote beside a
    gpu-fraction annotation, to be compared once the share is sized."""

    shares: list[ShareIntent] = field(default_factory=list)
    stale: list[ShareIntent] = field(default_factory=list)
    user_vram: dict[ContainerKey, int] = field(default_factory=dict)


def plan_pod(
    pod: PodView, policy: Policy, inventory: MigInventory = NO_INVENTORY
) -> PodPlan | list[Violation]:
    """`inventory`: what the cluster's nodes advertise, where the server reads them."""
    sharing = policy.sharing
    record = ShareRecord.read(pod.annotations) if sharing else ShareRecord()
    backend = backend_for(sharing, policy.name, inventory, record) if sharing else None
    requests = read_gpu_requests(pod, policy, record, backend)
    violations = list(requests.violations)
    shares, whole = requests.shares, requests.whole
    if backend is not None:
        shares, whole = backend.per_card_shares(shares, whole)
    intents = _share_intents(shares, whole, record, violations)
    if intents.shares and whole:
        violations.append(_mixed_pod(whole[0], intents.shares[0]))
    if backend is not None:
        violations += backend.check_pod(pod, intents.shares, whole)
    if violations:
        return violations
    if intents.shares:
        assert sharing is not None and backend is not None
        return _plan_shares(pod, policy, sharing, backend, record, intents)
    gone: list[str] = []
    if intents.stale or record.containers:
        gone = stale_selector_keys(pod, record.node_selector, policy.whole_gpu.node_selector)
    plan = PodPlan(
        pod, policy, record, tuple(whole), tuple(intents.stale), gone_selector=tuple(gone)
    )
    if whole:
        conflicts = node_selector_conflicts(pod, policy.whole_gpu.node_selector, plan.why, gone)
        if conflicts:
            return conflicts
    return plan


def _plan_shares(
    pod: PodView,
    policy: Policy,
    sharing: Sharing,
    backend: ShareBackend,
    record: ShareRecord,
    intents: _ShareIntents,
) -> PodPlan | list[Violation]:
    choice = choose_model(pod, sharing, policy.name, record, backend.inventory)
    if isinstance(choice, Violation):
        return [choice]
    violations: list[Violation] = []
    sized: list[SizedShare] = []
    for intent in intents.shares:
        share = size_share(intent, choice.model, sharing)
        if isinstance(share, Violation):
            violations.append(share)
            continue
        written = intents.user_vram.get(_key(intent.container))
        if written is not None and written != share.units:
            violations.append(_annotation_disagrees(share, written, sharing))
            continue
        sized.append(share)
    if violations:
        return violations
    violations += backend.check(sized, pod)
    if sharing.frameworks and not violations:
        violations += [v for share in sized if (v := _below_headroom(backend.granted(share)))]
    if violations:
        return violations
    rendering = backend.render(sized, pod)
    planned: list[PlannedShare] = []
    for share in sized:
        recorded = record.containers.get(share.intent.container.name)
        # The record and the env say what the backend gives (HAMi's whole percent, KAI's
        # hundredths); the rendering is made from what was sized.
        granted = backend.granted(share)
        managed = set(recorded.env) if recorded else set()
        env, env_violations = plan_env(
            granted,
            sharing,
            policy.name,
            managed,
            backend.seen_mib(granted),
            recorded.merged if recorded else {},
        )
        violations += env_violations
        container_rendering = rendering.containers[share.intent.container.name]
        planned.append(
            PlannedShare(
                share,
                container_rendering,
                tuple(env),
                _asked(record, share),
                granted,
                backend.limit_mib(granted),
            )
        )
    gone = stale_selector_keys(pod, record.node_selector, sharing.placement.node_selector)
    plan = PodPlan(
        pod,
        policy,
        record,
        stale=tuple(intents.stale),
        shares=tuple(planned),
        choice=choice,
        rendering=rendering,
        gone_selector=tuple(gone),
    )
    violations += node_selector_conflicts(pod, sharing.placement.node_selector, plan.why, gone)
    wanted_class = sharing.runtime_class_name
    present_class = pod.runtime_class_name()
    if (
        wanted_class is not None
        and present_class is not None
        and present_class != wanted_class
        and not owns_runtime_class(pod, record)
    ):
        violations.append(runtime_class_conflict(present_class, wanted_class, plan.why))
    return violations or plan


def owns_runtime_class(pod: PodView, record: ShareRecord) -> bool:
    """Whether the pod's runtimeClassName is the one this webhook set, not its user's."""
    recorded = record.runtime_class_name
    return recorded is not None and pod.runtime_class_name() == recorded


def is_recorded(record: ShareRecord, intent: ShareIntent) -> bool:
    """Whether this share is what the webhook wrote before, not what its user wrote: VRAM (or
    a backend's resources, read back as VRAM) of the recorded size, or an annotation the
    backend wrote with the recorded value."""
    if intent.recorded:
        return True
    if intent.source == "annotation":
        return record.annotations.get(intent.annotation) == intent.written
    recorded = record.vram_of(intent.container.name)
    if intent.source != "vram" or recorded is None or intent.vram_units is None:
        return False
    return same_amount(recorded, intent.vram_units)


def _asked(record: ShareRecord, share: SizedShare) -> str:
    intent = share.intent
    recorded = record.containers.get(intent.container.name)
    if recorded is not None and is_recorded(record, intent):
        return recorded.asked
    return intent.asked


def _key(container: Container) -> ContainerKey:
    return container.kind, container.index


def _share_intents(
    intents: list[ShareIntent],
    whole: list[WholeGpu],
    record: ShareRecord,
    violations: list[Violation],
) -> _ShareIntents:
    found = _ShareIntents()
    whole_containers = {_key(gpu.container) for gpu in whole}
    by_container: dict[ContainerKey, list[ShareIntent]] = {}
    for intent in intents:
        by_container.setdefault(_key(intent.container), []).append(intent)
    for key, group in by_container.items():
        vram = next((i for i in group if i.source == "vram"), None)
        ours = vram is not None and is_recorded(record, vram)
        fresh = [i for i in group if i.source != "vram"]
        if vram is not None and ours and (fresh or key in whole_containers):
            # A fresh fraction resizes the webhook's own VRAM; a whole GPU replaces it.
            if not fresh:
                found.stale.append(vram)
                continue
            vram = None
        if len(fresh) > 1 or (fresh and vram is not None and fresh[0].source == "quantity"):
            asked = ", ".join(f"{i.resource} {i.written}" for i in group)
            violations.append(
                Violation(
                    "one-share-per-container",
                    f"{group[0].container.label} asks for several shares ({asked}): keep one",
                )
            )
        elif fresh:
            if vram is not None and vram.vram_units is not None:
                found.user_vram[key] = vram.vram_units
            found.shares.append(fresh[0])
        elif vram is not None:
            found.shares.append(vram)
    return found


def _mixed_pod(whole: WholeGpu, share: ShareIntent) -> Violation:
    if whole.container is share.container:
        return Violation(
            "mixed-gpu-pod",
            f"{whole.container.label} takes whole GPUs ({whole.resource} {whole.count}) and a "
            f"share of one ({share.resource} {share.written}): a node shares its GPUs by memory "
            "or by card, never both, so keep one",
        )
    return Violation(
        "mixed-gpu-pod",
        f"{whole.container.label} takes whole GPUs ({whole.resource} {whole.count}) and "
        f"{share.container.label} a share of one: a node shares its GPUs by memory or by card, "
        "never both, so split them into two pods",
    )


def _annotation_disagrees(share: SizedShare, written: int, sharing: Sharing) -> Violation:
    return Violation(
        "annotation-conflict",
        f"{share.intent.container.label}: annotation {share.intent.asked} "
        f"is {share.units} {sharing.unit} of a {share.model.product}, but the container asks for "
        f"{sharing.vram_resource} {written}: keep one of the two",
    )


def _below_headroom(share: SizedShare) -> Violation | None:
    """A share too small to hold a framework beside the CUDA context (frameworks.py)."""
    if share.mib > FRAMEWORK_HEADROOM_MIB:
        return None
    return Violation(
        "share-below-headroom",
        f"{share.intent.container.label}: {share.intent.asked} is {share.mib} MiB, and a CUDA "
        f"process needs {FRAMEWORK_HEADROOM_MIB} MiB of room before its framework takes any: "
        f"ask for more than {FRAMEWORK_HEADROOM_MIB} MiB",
    )
