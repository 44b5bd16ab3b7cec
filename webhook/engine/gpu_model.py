"""Which GPU model a pod's share is measured against.

The models a pod may run on by its own `nodeSelector` and required node affinity on the model
label; else the model recorded when the pod (or its template) was rewritten; else the
policy's default model. A memory fraction is only right on the card it was computed for, so
`pin` says whether the pod must get (or keep) `nodeSelector: {<label>: <model>}` from us.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.engine.findings import Violation
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.pod_spec import MalformedObject, PodParts, PodView
from webhook.engine.share_record import ShareRecord
from webhook.engine.workloads import Path, PodTemplateLocation
from webhook.policy.catalogue import product_names
from webhook.policy.model import GpuModel, Sharing
from webhook.policy.scope import ModelsNamed


@dataclass(frozen=True)
class ModelChoice:
    model: GpuModel
    pin: bool
    how: str


def choose_model(
    pod: PodView,
    sharing: Sharing,
    policy_name: str,
    record: ShareRecord,
    inventory: MigInventory = NO_INVENTORY,
) -> ModelChoice | Violation:
    """`inventory`: what the nodes say, which sizes a model the catalogue lacks in a pool that
    takes every model."""
    label = sharing.model_label
    ignore_selector = owns_pin(pod, sharing, record)
    named = named_models(pod, label, sharing.models, ignore_selector=ignore_selector)
    if named is None:
        return _unnamed(sharing, policy_name, record, inventory)
    if not named:
        return Violation(
            "model-conflict",
            f"no GPU model satisfies the pod's nodeSelector and node affinity on {label}",
        )
    known = {product: model for product in named if (model := _model(sharing, inventory, product))}
    unknown = sorted(named - set(known))
    if unknown:
        return Violation(
            "model-unknown",
            f'{label}={", ".join(unknown)} is not a GPU model that policy "{policy_name}" '
            f"knows ({_known(sharing)}): select one of those; where that model's nodes are "
            "another pool's, the pod belongs to that pool's policy (select it there with "
            "spec.match.models); where they are this pool's, add the model to its "
            "spec.sharing.models (written whole with its memoryMiB) or to a GPUModelCatalogue "
            "beside the policies"
            + (
                "; no node labels its memory (nvidia.com/gpu.memory)" if sharing.every_model else ""
            ),
        )
    models = sorted(known.values(), key=lambda m: m.product)
    # Alike where a share sizes the same on each: memory, what the driver keeps, MIG slices.
    if len({(m.memory_mib, m.reserved_mib, m.mig_profiles) for m in models}) == 1:
        return ModelChoice(models[0], pin=False, how=f"{label} selected by the pod")
    if sharing.default_model in named:
        # The pod allows several cards; measuring against the default one and pinning it
        # there narrows what the pod asked for without contradicting it.
        model = sharing.models[sharing.default_model]
        return ModelChoice(model, pin=True, how=f'the default model of policy "{policy_name}"')
    listed = ", ".join(f"{m.product} ({m.memory_mib} MiB)" for m in models)
    return Violation(
        "model-ambiguous",
        f"the pod may run on GPU models with different memory ({listed}): a share must be "
        f"measured against one, so select a single {label}",
    )


# What a NotIn leaves besides the models a policy names: any other model, which no policy
# names (no label value has these characters), so such a pod is never taken for one pool's.
ANY_OTHER_MODEL = "<any other model>"


def models_named_in(location: PodTemplateLocation, parts: PodParts) -> ModelsNamed:
    """What a pod's parts name on a model label, as sizing reads it (the webhook's own pin
    left out), for policy selection."""
    pod = PodView(location, parts.metadata, parts.annotations, parts.spec, ())

    def named(label: str, names: frozenset[str]) -> frozenset[str] | None:
        # Read here, not for every pod: only a policy that selects by model asks.
        record = ShareRecord.read(parts.annotations)
        pinned = record.pinned and record.model is not None
        ours = pinned and pod.node_selector().get(label) == record.model
        found = named_models(pod, label, names | {ANY_OTHER_MODEL}, ignore_selector=ours)
        return None if found is None else frozenset(found)

    return named


def owns_pin(pod: PodView, sharing: Sharing, record: ShareRecord) -> bool:
    """Whether the pod's nodeSelector on the model label is the pin this webhook added."""
    selected = pod.node_selector().get(sharing.model_label)
    return record.pinned and record.model is not None and selected == record.model


def _unnamed(
    sharing: Sharing, policy_name: str, record: ShareRecord, inventory: MigInventory
) -> ModelChoice | Violation:
    recorded = _model(sharing, inventory, record.model) if record.model is not None else None
    if recorded is not None:
        return ModelChoice(recorded, pin=record.pinned, how="the model it was sized for")
    if sharing.default_model is None:
        return Violation(
            "model-required",
            f'policy "{policy_name}" has no default GPU model: select one with nodeSelector '
            f"{sharing.model_label}: <model> ({_known(sharing)})",
        )
    model = sharing.models[sharing.default_model]
    return ModelChoice(
        model,
        pin=not sharing.single_model_pool,
        how=f'the default model of policy "{policy_name}"',
    )


def _model(sharing: Sharing, inventory: MigInventory, product: str) -> GpuModel | None:
    """The pool's model of that name; in a pool that takes every model, one the catalogue
    lacks is sized from the memory its nodes label it with."""
    model = sharing.models.get(product)
    if model is not None or not sharing.every_model:
        return model
    memory = inventory.memory_of(product)
    return GpuModel(product, memory) if memory is not None else None


def _known(sharing: Sharing) -> str:
    return "known: " + product_names(sharing.models)


def named_models(
    pod: PodView, label: str, catalogue: Collection[str], *, ignore_selector: bool = False
) -> set[str] | None:
    """The models the pod may run on by its own selectors on `label`, or None when it names
    none; `catalogue`: the values the label may take (what a NotIn leaves)."""
    selected = None if ignore_selector else pod.node_selector().get(label)
    if selected is not None and not isinstance(selected, str):
        raise MalformedObject((*pod.location.spec, "nodeSelector", label), "must be a string")
    from_affinity = _affinity_models(pod, label, catalogue)
    if selected is None:
        return from_affinity
    if from_affinity is None:
        return {selected}
    return {selected} & from_affinity


def _affinity_models(pod: PodView, label: str, catalogue: Collection[str]) -> set[str] | None:
    """Models allowed by a required node affinity. Terms are ORed, so the pod is held to a set
    of models only when every term restricts the label."""
    terms = pod.required_node_selector_terms()
    if not terms:
        return None
    base: Path = (
        *pod.location.spec,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    allowed: set[str] = set()
    for index, term in enumerate(terms):
        values = _term_models(term, label, catalogue, (*base, index))
        if values is None:
            return None
        allowed |= values
    return allowed


def _term_models(term: Any, label: str, catalogue: Collection[str], path: Path) -> set[str] | None:
    """The models one term allows (expressions are ANDed), or None if it leaves them open."""
    if not isinstance(term, Mapping):
        raise MalformedObject(path, "must be an object")
    expressions = term.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise MalformedObject((*path, "matchExpressions"), "must be a list")
    allowed: set[str] | None = None
    for index, expression in enumerate(expressions):
        if not isinstance(expression, Mapping) or expression.get("key") != label:
            continue
        operator = expression.get("operator")
        if operator == "DoesNotExist":
            return set()
        if operator not in ("In", "NotIn"):
            continue
        values = expression.get("values") or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise MalformedObject((*path, "matchExpressions", index, "values"), "must be strings")
        if operator == "In":
            allowed = set(values) if allowed is None else allowed & set(values)
        else:
            allowed = (set(catalogue) if allowed is None else allowed) - set(values)
    return allowed
