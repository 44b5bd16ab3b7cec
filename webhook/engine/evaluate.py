"""One pod spec, one policy: the violations, or the changes that make the pod schedulable.

Deciding and writing are two passes. `plan.py` reads the pod and decides (the intents, the
model, the size of each share, what the policy's backend makes of them); a plan that breaks
a rule is a denial in both modes. When mutating, `render.py` writes the plan into the patch;
when validating, the object as stored (other webhooks may run after ours) is checked against
the same plan: every share written in the backend's form, and every enforced variable set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.engine.env_plan import stored_env_violations
from webhook.engine.findings import Violation
from webhook.engine.gpu_requests import mentions_gpu
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.patch import JsonPatch, PatchRecorder
from webhook.engine.plan import PlannedShare, PodPlan, plan_pod
from webhook.engine.pod_spec import PodView
from webhook.engine.render import render_plan
from webhook.engine.workloads import PodTemplateLocation
from webhook.policy.model import Policy
from webhook.quantity import same_amount
from webhook.warning_text import one_line_warning

Mode = Literal["mutate", "validate"]
_NO_OPERATIONS = JsonPatch()


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
    # The GPU model the rewritten shares were sized for; "" when nothing was rewritten.
    model: str = ""
    # Objects the patched object needs beside it in its namespace (a DRA share's
    # ResourceClaimTemplates), without a namespace: made before the object is admitted.
    companions: tuple[Mapping[str, Any], ...] = ()


def evaluate_pod(
    obj: dict[str, Any],
    location: PodTemplateLocation,
    policy: Policy,
    mode: Mode,
    pod: PodView | None = None,
    inventory: MigInventory = NO_INVENTORY,
) -> PodOutcome:
    """`pod`: the view of `obj` when the caller has read it already; `inventory`: what the
    cluster's nodes advertise, where the server reads them."""
    pod = pod or PodView.read(obj, location)
    if not mentions_gpu(pod, policy):
        return PodOutcome()
    plan = plan_pod(pod, policy, inventory)
    if not isinstance(plan, PodPlan):
        return PodOutcome(violations=tuple(plan), governed=True)
    if mode == "validate":
        return PodOutcome(violations=tuple(stored_violations(plan)), governed=True)
    recorder = PatchRecorder(obj)
    rendered = render_plan(plan, recorder)
    return PodOutcome(
        operations=JsonPatch(recorder.operations),
        document=recorder.document,
        warnings=tuple(one_line_warning(warning) for warning in rendered.warnings),
        rewritten="; ".join(rendered.rewrites),
        governed=True,
        model=plan.choice.model.product if rendered.rewrites and plan.choice else "",
        companions=claim_templates(plan),
    )


def claim_templates(plan: PodPlan) -> tuple[Mapping[str, Any], ...]:
    """The ResourceClaimTemplates the plan's shares are made from, each once."""
    found: dict[str, Mapping[str, Any]] = {}
    for share in plan.shares:
        claim = share.rendering.claim
        if claim is not None:
            found.setdefault(claim.template_name, claim.template)
    return tuple(found.values())


def stored_violations(plan: PodPlan) -> list[Violation]:
    """What the stored object lacks of the plan: a share not in the backend's form (the
    mutating webhook did not see it, or a later one undid it), an enforced variable unset."""
    found: list[Violation] = []
    for share in plan.shares:
        if not _written_as_planned(share, plan.pod):
            found.append(_not_rewritten(share))
        found += stored_env_violations(share.sized, list(share.env), plan.policy.name)
    rendering = plan.rendering
    if rendering is not None and plan.shares and not found:
        pod = plan.pod
        missing = [
            f"annotation {key}={value}"
            for key, value in rendering.annotations.items()
            if pod.annotations.get(key) != value
        ]
        if rendering.default_labels:
            labels = pod.labels()
            missing += [f"label {key}" for key in rendering.default_labels if key not in labels]
        if (
            rendering.scheduler_name is not None
            and pod.scheduler_name() != rendering.scheduler_name
        ):
            missing.append(f"schedulerName {rendering.scheduler_name}")
        if missing:
            found.append(
                Violation(
                    "not-rewritten",
                    f'the pod lacks {", ".join(missing)}, which policy "{plan.policy.name}" '
                    "sets for its share of a GPU: check that the mutating webhook is registered "
                    "for this object",
                )
            )
    return found


def _written_as_planned(share: PlannedShare, pod: PodView) -> bool:
    container = share.container
    claim = share.rendering.claim
    if claim is not None:
        made = pod.claim_named(claim.name)
        return (
            share.sized.intent.recorded
            and made is not None
            and made.get("resourceClaimTemplateName") == claim.template_name
        )
    wanted = share.rendering.resources
    for name, amount in wanted.items():
        if not same_amount(container.limits.get(name), amount):
            return False
        if name in container.requests and not same_amount(container.requests[name], amount):
            return False
    intent = share.sized.intent
    return intent.source == "annotation" or intent.resource in wanted


def _not_rewritten(share: PlannedShare) -> Violation:
    intent = share.sized.intent
    asked = (
        f"annotation {intent.asked}"
        if intent.source == "annotation"
        else f'{intent.resource} "{intent.written}"'
    )
    claim = share.rendering.claim
    target = ", ".join(share.rendering.resources) or (
        f"resource claim {claim.name}" if claim else "the backend's annotations"
    )
    what = (
        f"an amount of memory that was not rewritten into {target}"
        if intent.fraction is None
        else f"a fraction of a GPU that was not rewritten into {target}"
    )
    return Violation(
        "not-rewritten",
        f"{intent.container.label}: {asked} is {what}: check that the mutating webhook is "
        "registered for this object",
    )
