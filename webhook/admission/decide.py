"""From an admission request and the policies to a verdict: the one place that decides."""

from __future__ import annotations

from typing import Any

from webhook.admission.review import AdmissionRequest
from webhook.admission.verdict import Verdict
from webhook.bounded_cache import BoundedCache
from webhook.engine.evaluate import Mode, PodOutcome
from webhook.engine.gpu_model import models_named_in
from webhook.engine.gpu_requests import asks_for
from webhook.engine.inventory import NO_INVENTORY, InventorySource, MigInventory
from webhook.engine.outcome_cache import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ENTRIES,
    ENTRY_OVERHEAD_BYTES,
    OutcomeCache,
)
from webhook.engine.pod_spec import MalformedObject, labels_in, pod_parts
from webhook.engine.workloads import PodTemplateLocation, pod_template_location
from webhook.policy.model import Enforcement, Policy
from webhook.policy.namespace_labels import NamespaceLabelSource, NoCluster
from webhook.policy.policy_set import PolicySet, Selection
from webhook.warning_text import one_line_warning

HANDLED_OPERATIONS = ("CREATE", "UPDATE")
# Audit annotations of an object allowed in spite of a broken rule (Warn and Audit).
WOULD_DENY = "would-deny"
ENFORCEMENT = "enforcement"
_NO_CLUSTER = NoCluster()
# Shared by the threads of a process: the pods of one workload are judged once.
_OUTCOMES = OutcomeCache()
# Owned by the outcome each was made from, keyed by the warnings that lead it.
# Each keeps its outcome alive, so it is bounded in bytes as the outcomes are.
_ALLOWING_VERDICTS: BoundedCache[tuple[str, ...], Verdict] = BoundedCache(
    DEFAULT_MAX_ENTRIES, DEFAULT_MAX_BYTES
)


def cached_bytes() -> int:
    """An estimate of the bytes this process's outcome and verdict caches hold."""
    return _OUTCOMES.weight + _ALLOWING_VERDICTS.weight


def decide(
    request: AdmissionRequest,
    policies: PolicySet,
    mode: Mode,
    namespace_labels: NamespaceLabelSource | None = None,
    inventory: InventorySource | None = None,
) -> Verdict:
    """`namespace_labels` and `inventory`: what the cluster says, where the server reads it;
    without them, policies that need it judge as the offline tools do."""
    # Operations, subresources and kinds without a pod spec pass before any policy work.
    if request.operation not in HANDLED_OPERATIONS or request.sub_resource:
        return Verdict.allow()
    location = pod_template_location(request.group, request.kind)
    if location is None:
        return Verdict.allow()
    if location.is_pod and request.operation == "UPDATE":
        # A pod's containers and resources cannot change after creation; judging them again
        # would only block label and status updates of pods admitted under older policies.
        return Verdict.allow()
    obj: Any = request.object
    if not isinstance(obj, dict):
        return Verdict.bad_object(f"request.object must be a {request.kind} object")
    if _template_unchanged(obj, request.old_object, location):
        # Scaling, relabelling, finalizers: judging the template again would patch it under a
        # newer policy, and a ReplicaSet whose template drifts from its Deployment's is
        # replaced by the Deployment controller.
        return Verdict.allow()
    try:
        parts = pod_parts(obj, location)
        if not asks_for(parts.annotations, parts.spec, policies.is_gpu_resource):
            # Before selection: a pod without GPUs never waits on a namespace label lookup.
            return Verdict.allow()
        labels = labels_in(parts.metadata, location)
        models = models_named_in(location, parts) if policies.selects_by_model else None
        selection = policies.select(
            request.namespace, labels, namespace_labels or _NO_CLUSTER, models
        )
        policy = selection.policy
        nodes = _inventory_for(policy, inventory)
        outcome = _OUTCOMES.evaluate(obj, location, parts, policy, mode, nodes)
    except MalformedObject as error:
        return Verdict.bad_object(f"{_describe(request)}: {error}")
    if not outcome.governed:
        return Verdict.allow()
    warnings = _with_policy_named(
        selection, request.namespace, outcome.warnings, bool(outcome.operations)
    )
    if outcome.violations:
        message = "; ".join(violation.message for violation in outcome.violations)
        return _judged(policy, f"{_describe(request)}: {message}", warnings)
    # An allowing verdict names no request, so one serves every pod with this outcome.
    verdict = _ALLOWING_VERDICTS.get(outcome, warnings)
    if verdict is None:
        verdict = _allowing_verdict(outcome, policy, warnings)
        _ALLOWING_VERDICTS.put(outcome, warnings, verdict, _verdict_weight(outcome, warnings))
    return verdict


def _judged(policy: Policy, message: str, warnings: tuple[str, ...]) -> Verdict:
    """A broken rule's verdict, as the policy's enforcement says: a denial, or an object
    allowed as it is with the denial in its audit annotations (and, to Warn, a warning)."""
    audit = {"policy": policy.name}
    if policy.enforcement is Enforcement.ENFORCE:
        return Verdict.deny(message, warnings=warnings, audit=audit)
    mode = policy.enforcement.value
    audit |= {WOULD_DENY: message, ENFORCEMENT: mode}
    if policy.enforcement is Enforcement.WARN:
        # One line, as kubectl shows warnings; the audit annotation holds the whole message.
        said = one_line_warning(f'policy "{policy.name}" ({mode}) would deny this: {message}')
        warnings = (*warnings, said)
    return Verdict.allow(warnings=warnings, audit=audit)


def _inventory_for(policy: Policy, source: InventorySource | None) -> MigInventory:
    """The nodes' snapshot for a policy whose backend reads it (MIG), else none: the outcomes
    of other policies never depend on the nodes."""
    sharing = policy.sharing
    if source is None or sharing is None or not sharing.reads_nodes:
        return NO_INVENTORY
    return source.mig_inventory()


def _verdict_weight(outcome: PodOutcome, warnings: tuple[str, ...]) -> int:
    """The outcome it keeps alive, and its answer text (the patch in base64, the warnings)."""
    patch = sum(len(repr(operation)) for operation in outcome.operations)
    return ENTRY_OVERHEAD_BYTES + 3 * patch + 2 * sum(len(warning) for warning in warnings)


def _allowing_verdict(outcome: PodOutcome, policy: Policy, warnings: tuple[str, ...]) -> Verdict:
    audit = {"policy": policy.name}
    if outcome.rewritten:
        audit["rewritten"] = outcome.rewritten
        audit["model"] = outcome.model
    companions = outcome.companions
    if outcome.operations:
        return Verdict.patched(
            outcome.operations, warnings=warnings, audit=audit, companions=companions
        )
    return Verdict.allow(warnings=warnings, audit=audit, companions=companions)


def _with_policy_named(
    selection: Selection, namespace: str, warnings: tuple[str, ...], changed: bool
) -> tuple[str, ...]:
    """The engine's warnings, led by one that names the governing policy whenever the object
    is changed or warned about (kubectl shows warnings to whoever applied it)."""
    lead = selection.warnings(namespace)
    if not lead and (warnings or changed):
        lead = (f'GPU policy "{selection.policy.name}" applied',)
    return (*lead, *warnings)


def _template_unchanged(obj: dict[str, Any], old: Any, location: PodTemplateLocation) -> bool:
    if not isinstance(old, dict):
        return False
    return all(_at(obj, path) == _at(old, path) for path in (location.metadata, location.spec))


def _at(node: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _describe(request: AdmissionRequest) -> str:
    return f'{request.kind} "{request.name}"' if request.name else request.kind
