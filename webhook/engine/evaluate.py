"""One pod spec, one policy: the violations, or the changes that make the pod schedulable.

`mutate` rewrites fractions into VRAM and injects what the policy gives; `validate` changes
nothing and checks the object as it will be stored (other webhooks may run after ours). Both
read the pod the same way, so they never disagree on what a pod asks for.

Every change is a merge that leaves what is already right alone, so a second pass over a
mutated object (reinvocationPolicy: IfNeeded) yields no change. What the webhook itself
added is listed in a record annotation (see share_record.py), so that on a later UPDATE,
such as `kubectl apply` putting `nvidia.com/gpu: 250m` back beside the VRAM it became, the
webhook's own VRAM, env, pin and runtimeClassName are resized or removed instead of read as
the user's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.gpu_model import ModelChoice, choose_model, owns_pin
from webhook.engine.gpu_requests import mentions_gpu, read_gpu_requests
from webhook.engine.patch import JsonPatch, PatchRecorder
from webhook.engine.placement import (
    merge_node_selector,
    merge_tolerations,
    node_selector_conflicts,
    remove_node_selector_entries,
    remove_tolerations,
    resource_toleration,
    runtime_class_conflict,
    still_present_tolerations,
    wanted_tolerations,
)
from webhook.engine.pod_spec import (
    MAX_ANNOTATION_BYTES,
    Container,
    MalformedObject,
    PodView,
    annotation_bytes,
)
from webhook.engine.share_record import ContainerShare, ShareRecord
from webhook.engine.shares import SizedShare, placeholder_values, size_share
from webhook.engine.workloads import PodTemplateLocation
from webhook.policy.defaults import POLICY_ANNOTATION, SHARES_ANNOTATION
from webhook.policy.model import EnvTemplate, Placement, Policy, Sharing, Toleration
from webhook.quantity import QuantityError, parse_quantity
from webhook.warning_text import one_line_warning

Mode = Literal["mutate", "validate"]
_NO_OPERATIONS = JsonPatch()
ContainerKey = tuple[str, int]


@dataclass(frozen=True)
class PodOutcome:
    """`governed` is False for pods that ask for no GPU: nothing was looked at beyond that."""

    violations: tuple[Violation, ...] = ()
    operations: JsonPatch = _NO_OPERATIONS
    # The object with the operations applied, as the recorder made it.
    document: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    rewritten: str = ""
    governed: bool = False


@dataclass
class SharePlan:
    """The shares a pod asks for, one per container, and the VRAM of earlier shares that a
    whole GPU now replaces (`stale`). `user_vram` holds VRAM the user wrote beside a
    gpu-fraction annotation, to be compared once the share is sized."""

    shares: list[ShareIntent] = field(default_factory=list)
    stale: list[ShareIntent] = field(default_factory=list)
    user_vram: dict[ContainerKey, int] = field(default_factory=dict)


def evaluate_pod(
    obj: dict[str, Any],
    location: PodTemplateLocation,
    policy: Policy,
    mode: Mode,
    pod: PodView | None = None,
) -> PodOutcome:
    """`pod`: the view of `obj` when the caller has read it already."""
    pod = pod or PodView.read(obj, location)
    if not mentions_gpu(pod, policy):
        return PodOutcome()
    record = ShareRecord.read(pod.annotations) if policy.sharing else ShareRecord()
    requests = read_gpu_requests(pod, policy)
    violations = list(requests.violations)
    plan = _plan_shares(requests.shares, requests.whole, record, violations)
    if plan.shares and requests.whole:
        violations.append(_mixed_pod(requests.whole[0], plan.shares[0]))
    if violations:
        return PodOutcome(violations=tuple(violations), governed=True)
    change = _PodChange(pod, policy, mode, PatchRecorder(obj), record)
    if plan.shares:
        assert policy.sharing is not None
        change.give_shares(plan, policy.sharing)
    elif requests.whole or plan.stale or record.containers:
        change.give_whole_gpus(requests.whole, plan.stale)
    return change.outcome()


def _key(container: Container) -> ContainerKey:
    return container.kind, container.index


def _recorded_vram(record: ShareRecord, intent: ShareIntent) -> bool:
    """Whether this VRAM is what the webhook gave the container, not what its user wrote."""
    recorded = record.vram_of(intent.container.name)
    if recorded is None or intent.vram_units is None:
        return False
    try:
        return parse_quantity(recorded) == intent.vram_units
    except QuantityError:
        return False


def _owns_runtime_class(pod: PodView, record: ShareRecord) -> bool:
    """Whether the pod's runtimeClassName is the one this webhook set, not its user's."""
    recorded = record.runtime_class_name
    return recorded is not None and pod.runtime_class_name() == recorded


def _plan_shares(
    intents: list[ShareIntent],
    whole: list[WholeGpu],
    record: ShareRecord,
    violations: list[Violation],
) -> SharePlan:
    plan = SharePlan()
    whole_containers = {_key(gpu.container) for gpu in whole}
    by_container: dict[ContainerKey, list[ShareIntent]] = {}
    for intent in intents:
        by_container.setdefault(_key(intent.container), []).append(intent)
    for key, group in by_container.items():
        vram = next((i for i in group if i.source == "vram"), None)
        ours = vram is not None and _recorded_vram(record, vram)
        fresh = [i for i in group if i.source != "vram"]
        if vram is not None and ours and (fresh or key in whole_containers):
            # A fresh fraction resizes the webhook's own VRAM; a whole GPU replaces it.
            if not fresh:
                plan.stale.append(vram)
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
                plan.user_vram[key] = vram.vram_units
            plan.shares.append(fresh[0])
        elif vram is not None:
            plan.shares.append(vram)
    return plan


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


class _PodChange:
    def __init__(
        self,
        pod: PodView,
        policy: Policy,
        mode: Mode,
        recorder: PatchRecorder,
        record: ShareRecord,
    ) -> None:
        self.pod = pod
        self.policy = policy
        self.mode = mode
        self.recorder = recorder
        self.record = record
        self.violations: list[Violation] = []
        self.warnings: list[str] = []
        self.rewrites: list[str] = []

    @property
    def mutating(self) -> bool:
        return self.mode == "mutate"

    def outcome(self) -> PodOutcome:
        if self.violations:
            return PodOutcome(violations=tuple(self.violations), governed=True)
        return PodOutcome(
            operations=JsonPatch(self.recorder.operations),
            document=self.recorder.document,
            warnings=tuple(one_line_warning(warning) for warning in self.warnings),
            rewritten="; ".join(self.rewrites),
            governed=True,
        )

    # Whole GPUs ----------------------------------------------------------------------

    def give_whole_gpus(self, whole: list[WholeGpu], stale: list[ShareIntent]) -> None:
        """Whole GPUs for `whole`; what an earlier share left (`stale` VRAM, and whatever the
        record says the webhook added) goes first."""
        if not self.mutating:
            return
        for intent in stale:
            self._remove_share(intent)
        placement = self.policy.whole_gpu
        wanted = wanted_tolerations(placement, [gpu.resource for gpu in whole])
        gone_selector: list[str] = []
        if stale or self.record.containers:
            gone_selector = self._drop_record(wanted, placement)
        if whole:
            why = f'policy "{self.policy.name}" for whole GPUs'
            self._place(placement.node_selector, wanted, why, gone_selector)

    def _remove_share(self, intent: ShareIntent) -> None:
        resources = (*intent.container.path, "resources")
        self.recorder.remove((*resources, "limits", intent.resource))
        if intent.resource in intent.container.requests:
            self.recorder.remove((*resources, "requests", intent.resource))
        self.warnings.append(f"{intent.container.label}: whole GPUs replace its earlier share")

    def _drop_record(self, wanted: list[Toleration], placement: Placement) -> list[str]:
        """Remove what the record says the webhook added for a share, where nothing wants it
        now: its env, the model pin, the runtimeClassName, the tolerations and nodeSelector
        entries of the sharing placement, and the record itself. The nodeSelector keys removed
        are returned."""
        sharing = self.policy.sharing
        assert sharing is not None
        for container in self.pod.containers:
            recorded = self.record.containers.get(container.name)
            managed = set(recorded.env) if recorded else set()
            removed = [
                index
                for index, item in enumerate(container.env())
                if isinstance(item, Mapping) and item.get("name") in managed
            ]
            for index in reversed(removed):
                self.recorder.remove((*container.path, "env", index))
        spec = self.pod.location.spec
        if owns_pin(self.pod, sharing, self.record):
            self.recorder.remove((*spec, "nodeSelector", sharing.model_label))
        if _owns_runtime_class(self.pod, self.record):
            self.recorder.remove((*spec, "runtimeClassName"))
        # The VRAM resource's toleration is the webhook's for certain; the policy's own
        # tolerations only where the record lists them.
        added = [*self.record.tolerations, resource_toleration(sharing.vram_resource)]
        remove_tolerations(self.recorder, self.pod, added, wanted)
        gone = remove_node_selector_entries(
            self.recorder, self.pod, self.record.node_selector, placement.node_selector
        )
        annotations = (*self.pod.location.metadata, "annotations")
        for key in (SHARES_ANNOTATION, POLICY_ANNOTATION):
            if key in self.pod.annotations:
                self.recorder.remove((*annotations, key))
        return gone

    # Shares --------------------------------------------------------------------------

    def give_shares(self, plan: SharePlan, sharing: Sharing) -> None:
        choice = choose_model(self.pod, sharing, self.policy.name, self.record)
        if isinstance(choice, Violation):
            self.violations.append(choice)
            return
        shares: list[SizedShare] = []
        for intent in plan.shares:
            sized = size_share(intent, choice.model, sharing)
            if isinstance(sized, Violation):
                self.violations.append(sized)
                continue
            written = plan.user_vram.get(_key(intent.container))
            if written is not None and written != sized.units:
                self.violations.append(_annotation_disagrees(sized, written, sharing))
                continue
            shares.append(sized)
        if self.violations:
            return
        entries: dict[str, ContainerShare] = {}
        for share in shares:
            asked = self._resize(share, sharing)
            env = self._give_env(share, sharing)
            entries[share.intent.container.name] = ContainerShare(asked, str(share.units), env)
        if self.mutating:
            self._pin_model(choice, sharing)
            why = f'policy "{self.policy.name}" for shared GPUs'
            tolerations, selector = self._place_share(sharing.placement, why)
            runtime_class = self._give_runtime_class(sharing, why)
            record = ShareRecord(
                choice.model.product,
                choice.pin,
                entries,
                runtime_class,
                tuple(tolerations),
                selector,
            )
            self._write_record(record)

    def _asked(self, intent: ShareIntent) -> str:
        recorded = self.record.containers.get(intent.container.name)
        if intent.source == "vram" and recorded is not None and _recorded_vram(self.record, intent):
            return recorded.asked
        return intent.asked

    def _resize(self, share: SizedShare, sharing: Sharing) -> str:
        """Give the container its VRAM; the text of what it asked for is returned."""
        intent = share.intent
        container = intent.container
        asked = self._asked(intent)
        if intent.source == "vram":
            return asked
        units = str(share.units)
        current = container.limits.get(sharing.vram_resource)
        if intent.source == "annotation" and _same_amount(current, share.units):
            return asked
        if not self.mutating:
            self.violations.append(_not_rewritten(intent, sharing))
            return asked
        resources = (*container.path, "resources")
        self.recorder.put((*resources, "limits", sharing.vram_resource), units)
        # A Pod's requests are what the apiserver defaulted from limits; a template's are the
        # user's: give requests only where there were some.
        if (
            intent.in_requests
            or sharing.vram_resource in container.requests
            or (intent.source == "annotation" and self.pod.location.is_pod)
        ):
            self.recorder.put((*resources, "requests", sharing.vram_resource), units)
        if intent.source == "quantity":
            self.recorder.remove((*resources, "limits", intent.resource))
            if intent.resource in container.requests:
                self.recorder.remove((*resources, "requests", intent.resource))
        given = f"{sharing.vram_resource}={units} {sharing.unit} of {share.model.product}"
        self.rewrites.append(f"{container.name}: {asked} -> {given}")
        self.warnings.append(f"{container.label}: {asked} rewritten to {given}")
        return asked

    def _pin_model(self, choice: ModelChoice, sharing: Sharing) -> None:
        label = sharing.model_label
        path = (*self.pod.location.spec, "nodeSelector", label)
        if choice.pin:
            if self.pod.node_selector().get(label) != choice.model.product:
                self.warnings.append(f"pinned to {label}={choice.model.product}, {choice.how}")
            self.recorder.put(path, choice.model.product)
        elif owns_pin(self.pod, sharing, self.record):
            self.recorder.remove(path)

    def _give_runtime_class(self, sharing: Sharing, why: str) -> str | None:
        """Set the policy's runtimeClassName where the pod has none, or has the one the webhook
        set before; what the webhook set is returned, for the record. A pod that chose another
        is denied: the card is exposed to its containers under this one only."""
        wanted = sharing.runtime_class_name
        present = self.pod.runtime_class_name()
        ours = _owns_runtime_class(self.pod, self.record)
        path = (*self.pod.location.spec, "runtimeClassName")
        if wanted is None:
            if ours:
                self.recorder.remove(path)
            return None
        if present is not None and not ours:
            if present != wanted:
                self.violations.append(runtime_class_conflict(present, wanted, why))
            return None
        if present != wanted:
            self.warnings.append(f'runtimeClassName set to "{wanted}", which {why} requires')
        self.recorder.put(path, wanted)
        return wanted

    def _write_record(self, record: ShareRecord) -> None:
        annotations = (*self.pod.location.metadata, "annotations")
        written = {POLICY_ANNOTATION: self.policy.name, SHARES_ANNOTATION: record.encode()}
        if annotation_bytes({**self.pod.annotations, **written}) > MAX_ANNOTATION_BYTES:
            # Patched, the object would break the apiserver's limit, and a second pass of
            # ours would refuse it: refuse it now, before anything is written.
            raise MalformedObject(
                annotations,
                f"Too long: must have at most {MAX_ANNOTATION_BYTES} bytes with the "
                f"{POLICY_ANNOTATION} and {SHARES_ANNOTATION} annotations a share adds",
            )
        for key, value in written.items():
            self.recorder.put((*annotations, key), value)

    def _place(
        self,
        selector: Mapping[str, str],
        tolerations: list[Toleration],
        why: str,
        gone: Collection[str] = (),
    ) -> tuple[list[Toleration], dict[str, str]]:
        """Merge these nodeSelector entries and tolerations into the pod, where the entries of
        `gone` (being removed) do not count as present; what was added is returned."""
        conflicts = node_selector_conflicts(self.pod, selector, why, gone)
        if conflicts:
            self.violations.extend(conflicts)
            return [], {}
        added_selector = merge_node_selector(self.recorder, self.pod, selector, gone)
        return merge_tolerations(self.recorder, self.pod, tolerations), added_selector

    def _place_share(
        self, placement: Placement, why: str
    ) -> tuple[list[Toleration], dict[str, str]]:
        """Place a share, and keep track of the policy's own tolerations and nodeSelector
        entries the webhook added (the VRAM resource's toleration is recognised as it is):
        those an edited policy no longer asks for are removed."""
        sharing = self.policy.sharing
        assert sharing is not None
        wanted = wanted_tolerations(placement, [sharing.vram_resource])
        remove_tolerations(self.recorder, self.pod, self.record.tolerations, wanted)
        gone = remove_node_selector_entries(
            self.recorder, self.pod, self.record.node_selector, placement.node_selector
        )
        extras = list(placement.tolerations)
        kept_tolerations = still_present_tolerations(self.pod, self.record.tolerations, extras)
        # An entry not removed that still holds the recorded value is one the policy wants.
        present = self.pod.node_selector()
        kept_selector = {
            key: value
            for key, value in self.record.node_selector.items()
            if key not in gone and present.get(key) == value
        }
        added, added_selector = self._place(placement.node_selector, wanted, why, gone)
        return (
            [*kept_tolerations, *(t for t in added if t in extras)],
            {**kept_selector, **added_selector},
        )

    # Env -----------------------------------------------------------------------------

    def _give_env(self, share: SizedShare, sharing: Sharing) -> tuple[str, ...]:
        """Set the policy's variables; the names the webhook manages are returned."""
        container = share.intent.container
        recorded = self.record.containers.get(container.name)
        managed = set(recorded.env) if recorded else set()
        present: dict[str, tuple[int, Mapping[str, Any]]] = {}
        for index, item in enumerate(container.env()):
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                present.setdefault(item["name"], (index, item))
        values = placeholder_values(share, sharing)
        kept: list[str] = []
        removed: list[int] = []
        env_path = (*container.path, "env")
        for template in sharing.env:
            value = template.value.format_map(values)
            existing = present.get(template.name)
            replaced_by = next((name for name in template.unless_set if name in present), None)
            if replaced_by is not None:
                if template.enforce:
                    self.violations.append(_env_replaced(share, template, replaced_by, self.policy))
                elif existing is not None and template.name in managed:
                    removed.append(existing[0])
                continue
            if existing is None:
                if self.mutating:
                    self.recorder.append(env_path, {"name": template.name, "value": value})
                    kept.append(template.name)
                elif template.enforce:
                    self.violations.append(_env_wrong(share, template, None, value, self.policy))
                continue
            index, item = existing
            right = item.get("value") == value and "valueFrom" not in item
            if template.name in managed:
                kept.append(template.name)
                if not right and self.mutating:
                    self.recorder.set((*env_path, index), {"name": template.name, "value": value})
                    continue
            if not right and template.enforce:
                self.violations.append(_env_wrong(share, template, item, value, self.policy))
        if self.mutating:
            for index in sorted(removed, reverse=True):
                self.recorder.remove((*env_path, index))
        return tuple(sorted(kept))


def _same_amount(written: object, units: int) -> bool:
    try:
        return written is not None and parse_quantity(written) == units
    except QuantityError:
        return False


def _not_rewritten(intent: ShareIntent, sharing: Sharing) -> Violation:
    asked = (
        f"annotation {intent.asked}"
        if intent.source == "annotation"
        else f'{intent.resource} "{intent.written}"'
    )
    what = (
        f"an amount of memory that was not rewritten into {sharing.vram_resource}"
        if intent.fraction is None
        else f"a fraction of a GPU that was not rewritten into {sharing.vram_resource}"
    )
    return Violation(
        "not-rewritten",
        f"{intent.container.label}: {asked} is {what}: check that the mutating webhook is "
        "registered for this object",
    )


def _annotation_disagrees(share: SizedShare, written: int, sharing: Sharing) -> Violation:
    return Violation(
        "annotation-conflict",
        f"{share.intent.container.label}: annotation {share.intent.asked} "
        f"is {share.units} {sharing.unit} of a {share.model.product}, but the container asks for "
        f"{sharing.vram_resource} {written}: keep one of the two",
    )


def _env_replaced(
    share: SizedShare, template: EnvTemplate, replaced_by: str, policy: Policy
) -> Violation:
    return Violation(
        "env-enforced",
        f"{share.intent.container.label}: env {replaced_by} stands in for {template.name}, "
        f'which policy "{policy.name}" sets for its share of the GPU: remove {replaced_by}',
    )


def _env_wrong(
    share: SizedShare,
    template: EnvTemplate,
    existing: Mapping[str, Any] | None,
    value: str,
    policy: Policy,
) -> Violation:
    label = share.intent.container.label
    what = f'policy "{policy.name}" sets it to "{value}" for its share of the GPU'
    if existing is None:
        return Violation(
            "env-enforced",
            f'{label}: env {template.name} is not set, but {what}: set it to "{value}"',
        )
    found = (
        "is set from a reference"
        if "valueFrom" in existing
        else f'is "{existing.get("value") or ""}"'
    )
    return Violation(
        "env-enforced",
        f"{label}: env {template.name} {found}, but {what}: remove it from the pod",
    )
