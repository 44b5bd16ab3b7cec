"""One pod spec, one policy: the violations, or the changes that make the pod schedulable.

`mutate` rewrites fractions into VRAM and injects what the policy gives; `validate` changes
nothing and checks the object as it will be stored (other webhooks may run after ours). Both
read the pod the same way, so they never disagree on what a pod asks for.

Every change is a merge that leaves what is already right alone, so a second pass over a
mutated object (reinvocationPolicy: IfNeeded) yields no change at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.gpu_model import ModelChoice, choose_model
from webhook.engine.gpu_requests import mentions_gpu, read_gpu_requests
from webhook.engine.patch import Operation, PatchRecorder
from webhook.engine.placement import (
    merge_node_selector,
    merge_tolerations,
    node_selector_conflicts,
    wanted_tolerations,
)
from webhook.engine.pod_spec import PodView
from webhook.engine.shares import SizedShare, placeholder_values, size_share
from webhook.engine.workloads import PodTemplateLocation
from webhook.policy.defaults import FRACTION_ANNOTATION, POLICY_ANNOTATION, REWRITTEN_ANNOTATION
from webhook.policy.model import Placement, Policy, Sharing

Mode = Literal["mutate", "validate"]
MAX_WARNING_LENGTH = 119


@dataclass(frozen=True)
class PodOutcome:
    """`governed` is False for pods that ask for no GPU: nothing was looked at beyond that."""

    violations: tuple[Violation, ...] = ()
    operations: tuple[Operation, ...] = ()
    document: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    rewritten: str = ""
    governed: bool = False


def evaluate_pod(
    obj: dict[str, Any], location: PodTemplateLocation, policy: Policy, mode: Mode
) -> PodOutcome:
    pod = PodView.read(obj, location)
    if not mentions_gpu(pod, policy):
        return PodOutcome()
    requests = read_gpu_requests(pod, policy)
    violations = list(requests.violations)
    shares, existing_vram = _one_share_per_container(requests.shares, violations)
    if shares and requests.whole:
        violations.append(_mixed_pod(requests.whole[0], shares[0]))
    if violations:
        return PodOutcome(violations=tuple(violations), governed=True)
    change = _PodChange(pod, policy, mode, PatchRecorder(obj))
    if shares:
        assert policy.sharing is not None
        change.give_shares(shares, existing_vram, policy.sharing)
    else:
        change.place_whole_gpus(requests.whole)
    return change.outcome()


def _container_key(intent: ShareIntent | WholeGpu) -> tuple[str, int]:
    return intent.container.kind, intent.container.index


def _one_share_per_container(
    intents: list[ShareIntent], violations: list[Violation]
) -> tuple[list[ShareIntent], dict[tuple[str, int], int]]:
    """One share per container. The annotation form and the VRAM it was rewritten into are
    the same share seen twice (a second pass), so the annotation wins and the VRAM already
    given is returned for comparison."""
    by_container: dict[tuple[str, int], list[ShareIntent]] = {}
    for intent in intents:
        by_container.setdefault(_container_key(intent), []).append(intent)
    shares: list[ShareIntent] = []
    existing_vram: dict[tuple[str, int], int] = {}
    for key, group in by_container.items():
        sources = sorted(intent.source for intent in group)
        if sources == ["annotation", "vram"]:
            annotation = next(i for i in group if i.source == "annotation")
            vram = next(i for i in group if i.source == "vram")
            assert vram.vram_units is not None
            existing_vram[key] = vram.vram_units
            shares.append(annotation)
        elif len(group) == 1:
            shares.append(group[0])
        else:
            asked = ", ".join(f"{i.resource} {i.written}" for i in group)
            violations.append(
                Violation(
                    "one-share-per-container",
                    f"{group[0].container.label} asks for several shares ({asked}): keep one",
                )
            )
    return shares, existing_vram


def _mixed_pod(whole: WholeGpu, share: ShareIntent) -> Violation:
    return Violation(
        "mixed-gpu-pod",
        f"{whole.container.label} takes whole GPUs ({whole.resource} {whole.count}) and "
        f"{share.container.label} a share of one: a node shares its GPUs by memory or by card, "
        "never both, so split them into two pods",
    )


def _short(text: str) -> str:
    """kubectl prints each warning on one line; long ones are cut, not wrapped."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_WARNING_LENGTH else text[: MAX_WARNING_LENGTH - 3] + "..."


class _PodChange:
    def __init__(self, pod: PodView, policy: Policy, mode: Mode, recorder: PatchRecorder):
        self.pod = pod
        self.policy = policy
        self.mode = mode
        self.recorder = recorder
        self.violations: list[Violation] = []
        self.warnings: list[str] = []
        self.rewrites: list[str] = []

    def outcome(self) -> PodOutcome:
        if self.violations:
            return PodOutcome(violations=tuple(self.violations), governed=True)
        if self.rewrites:
            annotations = (*self.pod.location.metadata, "annotations")
            self.recorder.put((*annotations, POLICY_ANNOTATION), self.policy.name)
            self.recorder.put((*annotations, REWRITTEN_ANNOTATION), "; ".join(self.rewrites))
        return PodOutcome(
            operations=tuple(self.recorder.operations),
            document=self.recorder.document,
            warnings=tuple(_short(warning) for warning in self.warnings),
            rewritten="; ".join(self.rewrites),
            governed=True,
        )

    def place_whole_gpus(self, whole: list[WholeGpu]) -> None:
        if self.mode == "mutate":
            resources = [gpu.resource for gpu in whole]
            why = f'policy "{self.policy.name}" for whole GPUs'
            self._place(self.policy.whole_gpu, resources, {}, why)

    def give_shares(
        self,
        intents: list[ShareIntent],
        existing_vram: Mapping[tuple[str, int], int],
        sharing: Sharing,
    ) -> None:
        choice = choose_model(self.pod, sharing, self.policy.name)
        if isinstance(choice, Violation):
            self.violations.append(choice)
            return
        shares: list[SizedShare] = []
        for intent in intents:
            sized = size_share(intent, choice.model, sharing)
            if isinstance(sized, Violation):
                self.violations.append(sized)
                continue
            given = existing_vram.get(_container_key(intent))
            if given is not None and given != sized.units:
                self.violations.append(_annotation_disagrees(sized, given, sharing))
                continue
            shares.append(sized)
        if self.violations:
            return
        for share in shares:
            if _needs_rewrite(share, existing_vram):
                self._rewrite_resources(share, sharing)
        pin = self._pin(choice, sharing)
        if self.mode == "mutate":
            why = f'policy "{self.policy.name}" for shared GPUs'
            self._place(sharing.placement, [sharing.vram_resource], pin, why)
        for share in shares:
            self._give_env(share, sharing)

    def _pin(self, choice: ModelChoice, sharing: Sharing) -> dict[str, str]:
        if choice.pinned or sharing.single_model_pool:
            return {}
        if self.mode == "mutate":
            self.warnings.append(
                f"pinned to {sharing.model_label}={choice.model.product}, {choice.how}"
            )
        return {sharing.model_label: choice.model.product}

    def _rewrite_resources(self, share: SizedShare, sharing: Sharing) -> None:
        intent = share.intent
        container = intent.container
        if self.mode == "validate":
            self.violations.append(_not_rewritten(intent, sharing))
            return
        resources = (*container.path, "resources")
        units = str(share.units)
        self.recorder.put((*resources, "limits", sharing.vram_resource), units)
        # A Pod's requests are what the apiserver defaulted from limits; a template's are the
        # user's: give requests only where they were.
        if intent.in_requests or (intent.source == "annotation" and self.pod.location.is_pod):
            self.recorder.put((*resources, "requests", sharing.vram_resource), units)
        if intent.source == "quantity":
            self.recorder.remove((*resources, "limits", intent.resource))
            if intent.resource in container.requests:
                self.recorder.remove((*resources, "requests", intent.resource))
        asked = (
            f"{FRACTION_ANNOTATION}={intent.written}"
            if intent.source == "annotation"
            else f"{intent.resource}={intent.written}"
        )
        given = f"{sharing.vram_resource}={units} {sharing.unit} of {share.model.product}"
        self.rewrites.append(f"{container.name}: {asked} -> {given}")
        self.warnings.append(f"{container.label}: {asked} rewritten to {given}")

    def _place(
        self, placement: Placement, resources: list[str], extra: Mapping[str, str], why: str
    ) -> None:
        selector = {**extra, **placement.node_selector}
        conflicts = node_selector_conflicts(self.pod, selector, why)
        if conflicts:
            self.violations.extend(conflicts)
            return
        merge_node_selector(self.recorder, self.pod, selector)
        merge_tolerations(self.recorder, self.pod, wanted_tolerations(placement, resources))

    def _give_env(self, share: SizedShare, sharing: Sharing) -> None:
        container = share.intent.container
        present = {
            item["name"]: item
            for item in container.env()
            if isinstance(item, Mapping) and isinstance(item.get("name"), str)
        }
        values = placeholder_values(share, sharing)
        for template in sharing.env:
            value = template.value.format_map(values)
            replaced_by = next((name for name in template.unless_set if name in present), None)
            if replaced_by is not None:
                if template.enforce:
                    self.violations.append(
                        _env_replaced(share, template.name, replaced_by, self.policy)
                    )
                continue
            existing = present.get(template.name)
            if existing is None and self.mode == "mutate":
                self.recorder.append(
                    (*container.path, "env"), {"name": template.name, "value": value}
                )
                continue
            matches = existing is not None and existing.get("value") == value
            if template.enforce and not (matches and "valueFrom" not in existing):
                self.violations.append(
                    _env_not_allowed(share, template.name, existing, value, self.policy)
                )


def _needs_rewrite(share: SizedShare, existing_vram: Mapping[tuple[str, int], int]) -> bool:
    if share.intent.source == "quantity":
        return True
    return share.intent.source == "annotation" and _container_key(share.intent) not in existing_vram


def _not_rewritten(intent: ShareIntent, sharing: Sharing) -> Violation:
    asked = (
        f"annotation {FRACTION_ANNOTATION}={intent.written}"
        if intent.source == "annotation"
        else f'{intent.resource} "{intent.written}"'
    )
    return Violation(
        "not-rewritten",
        f"{intent.container.label}: {asked} is a fraction of a GPU that was not rewritten into "
        f"{sharing.vram_resource}: check that the mutating webhook is registered for this object",
    )


def _annotation_disagrees(share: SizedShare, given: int, sharing: Sharing) -> Violation:
    return Violation(
        "annotation-conflict",
        f"{share.intent.container.label}: annotation {FRACTION_ANNOTATION}={share.intent.written} "
        f"is {share.units} {sharing.unit} of a {share.model.product}, but the container asks for "
        f"{sharing.vram_resource} {given}: keep one of the two",
    )


def _env_replaced(share: SizedShare, name: str, replaced_by: str, policy: Policy) -> Violation:
    return Violation(
        "env-enforced",
        f"{share.intent.container.label}: env {replaced_by} stands in for {name}, which policy "
        f'"{policy.name}" sets for its share of the GPU: remove {replaced_by} from the pod',
    )


def _env_not_allowed(
    share: SizedShare, name: str, existing: Mapping[str, Any] | None, value: str, policy: Policy
) -> Violation:
    label = share.intent.container.label
    if existing is None:
        found = "is not set"
    elif "valueFrom" in existing:
        found = "is set from a reference"
    else:
        found = f'is "{existing.get("value")}"'
    return Violation(
        "env-enforced",
        f'{label}: env {name} {found}, but policy "{policy.name}" sets it to "{value}" for its '
        f"share of the GPU: remove it from the pod",
    )
