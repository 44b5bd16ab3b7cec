"""The second pass, when mutating: write a `PodPlan` into the patch.

Every change is a merge that leaves what is already right alone, so a second pass over a
mutated object (reinvocationPolicy: IfNeeded) yields no change. What the webhook wrote is
listed in the record annotation (share_record.py); what it wrote before and the plan no
longer wants (a share's resources, env, pin, runtimeClassName, tolerations, nodeSelector
entries, the backend's annotations, labels and schedulerName) is removed, where the pod still
holds it as written. What the user wrote stays.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.engine.backends.rendering import DEFAULT_SCHEDULER, Rendering
from webhook.engine.env_plan import EnvChange, without_ours
from webhook.engine.findings import ShareIntent
from webhook.engine.gpu_model import owns_pin
from webhook.engine.patch import PatchRecorder
from webhook.engine.placement import (
    merge_node_selector,
    merge_tolerations,
    remove_tolerations,
    resource_toleration,
    still_present_tolerations,
    wanted_tolerations,
)
from webhook.engine.plan import PlannedShare, PodPlan, owns_runtime_class
from webhook.engine.pod_spec import (
    MAX_ANNOTATION_BYTES,
    Container,
    MalformedObject,
    annotation_bytes,
    is_named,
)
from webhook.engine.share_record import ContainerShare, ShareRecord
from webhook.policy.defaults import POLICY_ANNOTATION, SHARES_ANNOTATION
from webhook.policy.frameworks import told_their_limit
from webhook.policy.model import BACKEND_LABELS, Sharing, Toleration
from webhook.quantity import same_amount


@dataclass
class Rendered:
    warnings: list[str] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)


def render_plan(plan: PodPlan, recorder: PatchRecorder) -> Rendered:
    writer = _Writer(plan, recorder)
    if plan.shares:
        writer.give_shares()
    else:
        writer.give_whole_gpus()
    return writer.rendered


class _Writer:
    def __init__(self, plan: PodPlan, recorder: PatchRecorder) -> None:
        self.plan = plan
        self.pod = plan.pod
        self.record = plan.record
        self.recorder = recorder
        self.rendered = Rendered()

    # Whole GPUs ----------------------------------------------------------------------

    def give_whole_gpus(self) -> None:
        """Whole GPUs; what an earlier share left (stale resources, and whatever the record
        says the webhook added) goes first."""
        plan = self.plan
        for intent in plan.stale:
            self._remove_share(intent)
        placement = plan.policy.whole_gpu
        wanted = wanted_tolerations(placement, [gpu.resource for gpu in plan.whole])
        if plan.stale or self.record.containers:
            self._drop_record(wanted)
        if plan.whole:
            self._place(placement.node_selector, wanted)

    def _remove_share(self, intent: ShareIntent) -> None:
        container = intent.container
        sharing = self.plan.sharing
        for resource in self.record.given_of(container.name, sharing.vram_resource):
            self._remove_resource(container.path, container.requests, resource)
        self.rendered.warnings.append(f"{container.label}: whole GPUs replace its earlier share")

    def _remove_resource(
        self, container_path: tuple[Any, ...], requests: Mapping[str, Any], resource: str
    ) -> None:
        resources = (*container_path, "resources")
        self.recorder.remove((*resources, "limits", resource))
        if resource in requests:
            self.recorder.remove((*resources, "requests", resource))

    def _drop_record(self, wanted: list[Toleration]) -> None:
        """Remove what the record says the webhook added for a share, where nothing wants it
        now, and the record itself."""
        sharing = self.plan.sharing
        for container in self.pod.containers:
            recorded = self.record.containers.get(container.name)
            if recorded is not None:
                self._remove_env(container, recorded)
        spec = self.pod.location.spec
        if owns_pin(self.pod, sharing, self.record):
            self.recorder.remove((*spec, "nodeSelector", sharing.model_label))
        if owns_runtime_class(self.pod, self.record):
            self.recorder.remove((*spec, "runtimeClassName"))
        added = [*self.record.tolerations, *self._recorded_resource_tolerations()]
        remove_tolerations(self.recorder, self.pod, added, wanted)
        self._remove_gone_selector()
        self._render_pod_fields(Rendering({}))
        self._give_claims()
        annotations = (*self.pod.location.metadata, "annotations")
        for key in (SHARES_ANNOTATION, POLICY_ANNOTATION):
            if key in self.pod.annotations:
                self.recorder.remove((*annotations, key))

    def _recorded_resource_tolerations(self, keep: Collection[str] = ()) -> list[Toleration]:
        """The tolerations of the resources the record says the webhook gave, which are the
        webhook's for certain (besides those of `keep`)."""
        vram = self.plan.sharing.vram_resource
        given = {vram}
        for name in self.record.containers:
            given.update(self.record.given_of(name, vram))
        return [resource_toleration(resource) for resource in sorted(given - set(keep))]

    def _remove_env(self, container: Container, recorded: ContainerShare) -> None:
        """Take away the variables the webhook set (only its entry, in a merged list)."""
        changes = [
            without_ours(name, recorded.merged.get(name), index, item)
            for index, item in enumerate(container.env())
            if isinstance(item, Mapping) and (name := item.get("name")) in recorded.env
        ]
        self._write_env(container, changes)

    # Shares --------------------------------------------------------------------------

    def give_shares(self) -> None:
        plan = self.plan
        sharing = plan.sharing
        assert plan.choice is not None and plan.rendering is not None
        entries: dict[str, ContainerShare] = {}
        for share in plan.shares:
            self._resize(share)
            env, merged = self._give_env(share)
            given = dict(share.rendering.resources)
            granted = share.granted
            if given == {sharing.vram_resource: str(granted.units)}:
                given = {}  # as records before backends wrote it
            claim = share.rendering.claim
            entries[share.container.name] = ContainerShare(
                share.asked,
                str(granted.units),
                env,
                given,
                merged,
                str(granted.mib),
                "" if share.limit_mib is None else str(share.limit_mib),
                granted.intent.cards,
                claim.name if claim else "",
                claim.template_name if claim else "",
            )
        self._give_claims()
        self._pin_model()
        tolerations, selector = self._place_share()
        runtime_class = self._give_runtime_class()
        labels, scheduler = self._render_pod_fields(plan.rendering)
        record = ShareRecord(
            plan.choice.model.product,
            plan.choice.pin,
            entries,
            runtime_class,
            tuple(tolerations),
            selector,
            dict(plan.rendering.annotations),
            labels,
            scheduler,
            sharing.hard_limit.value,
        )
        if self.rendered.rewrites and not sharing.enforced:
            self.rendered.warnings.append(unenforced_warning(sharing))
        self._write_record(record)

    def _resize(self, share: PlannedShare) -> None:
        """Give the container the resources of its share, and take away the intent's and an
        earlier share's that it does not keep."""
        intent = share.sized.intent
        container = intent.container
        sharing = self.plan.sharing
        wanted = share.rendering.resources
        resources = (*container.path, "resources")
        # A Pod's requests are what the apiserver defaulted from limits; a template's are the
        # user's: give requests only where there were some.
        with_requests = (
            intent.in_requests
            or any(name in container.requests for name in wanted)
            or (intent.source == "annotation" and self.pod.location.is_pod)
        )
        changed = False
        for name, amount in wanted.items():
            if same_amount(container.limits.get(name), amount) and (
                not with_requests or same_amount(container.requests.get(name), amount)
            ):
                continue
            changed = True
            self.recorder.put((*resources, "limits", name), amount)
            if with_requests:
                self.recorder.put((*resources, "requests", name), amount)
        leftovers = set(self.record.given_of(container.name, sharing.vram_resource))
        if intent.source != "annotation":
            leftovers.add(intent.resource)
        gone = [
            name
            for name in sorted(leftovers - set(wanted))
            if name in container.limits or name in container.requests
        ]
        if gone:
            changed = True
            self._remove_amounts(container, gone, kept=set(wanted))
        if changed:
            self._say_rewritten(share)

    def _remove_amounts(self, container: Container, names: list[str], kept: set[str]) -> None:
        """Take these resources out of limits and requests; a map left empty goes as a whole,
        and `resources` with it when nothing else is in it (KAI's shares keep no resource)."""
        resources = (*container.path, "resources")
        emptied = []
        for field_name, amounts in (("limits", container.limits), ("requests", container.requests)):
            taken = [name for name in names if name in amounts]
            if not taken:
                continue
            if not (set(amounts) - set(taken)) and not kept:
                emptied.append(field_name)
                continue
            for name in taken:
                self.recorder.remove((*resources, field_name, name))
        raw = container.raw.get("resources")
        if emptied and isinstance(raw, Mapping) and set(raw) <= set(emptied):
            self.recorder.remove(resources)
            return
        for field_name in emptied:
            self.recorder.remove((*resources, field_name))

    def _say_rewritten(self, share: PlannedShare) -> None:
        container = share.container
        became = share.rendering.text or _describe_pod_fields(self.plan.rendering)
        given = f"{became} of {share.sized.model.product}"
        self.rendered.rewrites.append(f"{container.name}: {share.asked} -> {given}")
        self.rendered.warnings.append(f"{container.label}: {share.asked} rewritten to {given}")

    def _give_claims(self) -> None:
        """Give each share's container its claim, and the pod the claim made from the share's
        template; take away the claims the record says the webhook gave and the plan no longer
        wants (an emptied list goes as a whole, and `resources` with it when nothing else is
        in it). Read from the object as patched so far: a resize may have taken `resources`."""
        wanted = {
            share.container.name: share.rendering.claim
            for share in self.plan.shares
            if share.rendering.claim is not None
        }
        recorded = {name: e.claim for name, e in self.record.containers.items() if e.claim}
        if not (wanted or recorded):
            return
        for container in self.pod.containers:
            want = wanted.get(container.name)
            had = recorded.get(container.name)
            resources = (*container.path, "resources")
            references = self._current_list((*resources, "claims"))
            if had is not None and (want is None or want.name != had):
                _remove_named(self.recorder, (*resources, "claims"), references, {had})
                references = self._current_list((*resources, "claims"))
                if self.recorder.current(resources) == {}:
                    self.recorder.remove(resources)
            if want is not None and not any(is_named(ref, want.name) for ref in references):
                self.recorder.put((*resources, "claims"), [*references, {"name": want.name}])
        spec_claims = (*self.pod.location.spec, "resourceClaims")
        present = self._current_list(spec_claims)
        kept = {claim.name for claim in wanted.values()}
        _remove_named(self.recorder, spec_claims, present, set(recorded.values()) - kept)
        present = self._current_list(spec_claims)
        for claim in wanted.values():
            entry = {"name": claim.name, "resourceClaimTemplateName": claim.template_name}
            index = next((i for i, item in enumerate(present) if is_named(item, claim.name)), None)
            if index is None:
                self.recorder.put(spec_claims, [*present, entry])
                present = self._current_list(spec_claims)
            elif present[index] != entry:
                self.recorder.set((*spec_claims, index), entry)

    def _current_list(self, path: tuple[Any, ...]) -> list[Any]:
        found = self.recorder.current(path)
        return list(found) if isinstance(found, list) else []

    def _pin_model(self) -> None:
        plan = self.plan
        sharing = plan.sharing
        choice = plan.choice
        assert choice is not None
        label = sharing.model_label
        path = (*self.pod.location.spec, "nodeSelector", label)
        if choice.pin:
            if self.pod.node_selector().get(label) != choice.model.product:
                self.rendered.warnings.append(
                    f"pinned to {label}={choice.model.product}, {choice.how}"
                )
            self.recorder.put(path, choice.model.product)
        elif owns_pin(self.pod, sharing, self.record):
            self.recorder.remove(path)

    def _give_runtime_class(self) -> str | None:
        """Set the policy's runtimeClassName where the pod has none, or has the one the webhook
        set before (a pod that chose another is denied by the plan); what the webhook set is
        returned, for the record."""
        wanted = self.plan.sharing.runtime_class_name
        present = self.pod.runtime_class_name()
        ours = owns_runtime_class(self.pod, self.record)
        path = (*self.pod.location.spec, "runtimeClassName")
        if wanted is None:
            if ours:
                self.recorder.remove(path)
            return None
        if present is not None and not ours:
            return None
        if present != wanted:
            self.rendered.warnings.append(
                f'runtimeClassName set to "{wanted}", which {self.plan.why} requires'
            )
        self.recorder.put(path, wanted)
        return wanted

    def _render_pod_fields(self, rendering: Rendering) -> tuple[dict[str, str], str | None]:
        """The backend's annotations, labels and schedulerName, and the removal of those it
        wrote before and wants no more; the labels and scheduler the webhook set are returned."""
        metadata = self.pod.location.metadata
        present = self.pod.annotations
        for key, value in self.record.annotations.items():
            if key not in rendering.annotations and present.get(key) == value:
                self.recorder.remove((*metadata, "annotations", key))
        for key, value in rendering.annotations.items():
            self.recorder.put((*metadata, "annotations", key), value)
        set_labels: dict[str, str] = {}
        if not (self.record.labels or rendering.default_labels):
            return set_labels, self._give_scheduler(rendering.scheduler_name)
        labels = self.pod.labels()
        for key, value in self.record.labels.items():
            # Only labels a backend gives: the outcome key holds no other (a record is text).
            if key not in BACKEND_LABELS:
                continue
            if key not in rendering.default_labels and labels.get(key) == value:
                self.recorder.remove((*metadata, "labels", key))
        for key, value in rendering.default_labels.items():
            ours = self.record.labels.get(key)
            if key not in labels or (ours is not None and labels.get(key) == ours):
                self.recorder.put((*metadata, "labels", key), value)
                set_labels[key] = value
        return set_labels, self._give_scheduler(rendering.scheduler_name)

    def _give_scheduler(self, wanted: str | None) -> str | None:
        path = (*self.pod.location.spec, "schedulerName")
        present = self.pod.scheduler_name()
        ours = self.record.scheduler_name is not None and present == self.record.scheduler_name
        if wanted is None:
            if ours:
                self.recorder.remove(path)
            return None
        if present in (None, DEFAULT_SCHEDULER) or ours:
            if present != wanted:
                self.rendered.warnings.append(
                    f'schedulerName set to "{wanted}", which {self.plan.why} requires'
                )
            self.recorder.put(path, wanted)
            return wanted
        return None  # the pod's own choice, and the one wanted (the plan refuses others)

    def _write_record(self, record: ShareRecord) -> None:
        annotations = (*self.pod.location.metadata, "annotations")
        written = {POLICY_ANNOTATION: self.plan.policy.name, SHARES_ANNOTATION: record.encode()}
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
        self, selector: Mapping[str, str], tolerations: list[Toleration]
    ) -> tuple[list[Toleration], dict[str, str]]:
        """Merge these nodeSelector entries and tolerations into the pod (the plan has refused
        conflicts), where the entries being removed do not count as present; what was added is
        returned."""
        gone = self.plan.gone_selector
        added_selector = merge_node_selector(self.recorder, self.pod, selector, gone)
        return merge_tolerations(self.recorder, self.pod, tolerations), added_selector

    def _remove_gone_selector(self) -> None:
        """The nodeSelector entries the plan found the webhook set and nothing wants now."""
        for key in self.plan.gone_selector:
            self.recorder.remove((*self.pod.location.spec, "nodeSelector", key))

    def _place_share(self) -> tuple[list[Toleration], dict[str, str]]:
        """Place the shares, and keep track of the policy's own tolerations and nodeSelector
        entries the webhook added (the resources' tolerations are recognised as they are):
        those an edited policy no longer asks for are removed."""
        plan = self.plan
        placement = plan.sharing.placement
        resources = sorted({name for s in plan.shares for name in s.rendering.tolerated})
        wanted = wanted_tolerations(placement, resources)
        stale = [*self.record.tolerations, *self._recorded_resource_tolerations(resources)]
        remove_tolerations(self.recorder, self.pod, stale, wanted)
        self._remove_gone_selector()
        extras = list(placement.tolerations)
        kept_tolerations = still_present_tolerations(self.pod, self.record.tolerations, extras)
        # An entry not removed that still holds the recorded value is one the policy wants.
        present = self.pod.node_selector()
        kept_selector = {
            key: value
            for key, value in self.record.node_selector.items()
            if key not in plan.gone_selector and present.get(key) == value
        }
        added, added_selector = self._place(placement.node_selector, wanted)
        return (
            [*kept_tolerations, *(t for t in added if t in extras)],
            {**kept_selector, **added_selector},
        )

    # Env -----------------------------------------------------------------------------

    def _give_env(self, share: PlannedShare) -> tuple[tuple[str, ...], dict[str, str]]:
        """Write the planned env changes; the names the webhook manages are returned, and the
        keys it owns in merged lists."""
        self._write_env(share.container, share.env)
        owned = [change for change in share.env if change.owned]
        merged = {c.name: c.merge_key for c in owned if c.merge_key is not None}
        return tuple(sorted(change.name for change in owned)), merged

    def _write_env(self, container: Container, changes: Iterable[EnvChange]) -> None:
        env_path = (*container.path, "env")
        removed: list[int] = []
        for change in changes:
            if change.action == "add":
                self.recorder.append(env_path, {"name": change.name, "value": change.value})
            elif change.action == "set":
                item = {"name": change.name, "value": change.value}
                self.recorder.set((*env_path, change.index), item)
            elif change.action == "remove":
                removed.append(change.index)
        for index in sorted(removed, reverse=True):
            self.recorder.remove((*env_path, index))


def _remove_named(
    recorder: PatchRecorder, path: tuple[Any, ...], items: list[Any], names: set[str]
) -> None:
    """Remove the entries of the list at `path` with these names; the list goes as a whole
    where none is left."""
    doomed = [i for i, item in enumerate(items) if any(is_named(item, name) for name in names)]
    if not doomed:
        return
    if len(doomed) == len(items):
        recorder.remove(path)
        return
    for index in reversed(doomed):
        recorder.remove((*path, index))


def _describe_pod_fields(rendering: Rendering | None) -> str:
    if rendering is None:
        return ""
    return ", ".join(f"{key}={value}" for key, value in rendering.annotations.items())


def unenforced_warning(sharing: Sharing) -> str:
    """Said wherever a share is given that nothing below the scheduler holds."""
    frameworks = told_their_limit(sharing)
    told = ", ".join(frameworks)
    verb = "is" if len(frameworks) == 1 else "are"
    said = f"only {told} {verb} told their limit" if told else "no framework is told its limit"
    return f"GPU memory shares are not enforced on these nodes: {said}"
