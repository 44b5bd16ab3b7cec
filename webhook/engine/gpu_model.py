"""Which GPU model a pod's share is measured against.

The model a pod names, through `nodeSelector` or a required node affinity on the model label,
else the policy's default model. A memory fraction is only right on the card it was computed
for, so `pinned` says whether the pod already keeps to that card.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.engine.findings import Violation
from webhook.engine.pod_spec import MalformedObject, PodView
from webhook.policy.model import GpuModel, Sharing


@dataclass(frozen=True)
class ModelChoice:
    model: GpuModel
    pinned: bool
    how: str


def choose_model(pod: PodView, sharing: Sharing, policy_name: str) -> ModelChoice | Violation:
    label = sharing.model_label
    named = _named_models(pod, label)
    if named is None:
        if sharing.default_model is None:
            return Violation(
                "model-required",
                f'policy "{policy_name}" has no default GPU model: select one with nodeSelector '
                f"{label}: <model> ({_known(sharing)})",
            )
        model = sharing.models[sharing.default_model]
        return ModelChoice(model, pinned=False, how=f'the default model of policy "{policy_name}"')
    if not named:
        return Violation(
            "model-conflict",
            f"nodeSelector and node affinity on {label} name different GPU models: no node matches",
        )
    unknown = sorted(product for product in named if product not in sharing.models)
    if unknown:
        return Violation(
            "model-unknown",
            f'{label}={", ".join(unknown)} is not a GPU model that policy "{policy_name}" '
            f"knows ({_known(sharing)}): select one of those, or add it to spec.sharing.models",
        )
    models = sorted((sharing.models[product] for product in named), key=lambda m: m.product)
    if len({model.memory_mib for model in models}) > 1:
        listed = ", ".join(f"{m.product} ({m.memory_mib} MiB)" for m in models)
        return Violation(
            "model-ambiguous",
            f"the pod may run on GPU models with different memory ({listed}): a share must be "
            f"measured against one, so select a single {label}",
        )
    return ModelChoice(models[0], pinned=True, how=f"{label} selected by the pod")


def _known(sharing: Sharing) -> str:
    return "known: " + ", ".join(sharing.models)


def _named_models(pod: PodView, label: str) -> set[str] | None:
    """The models the pod may run on by its own selectors, or None when it names none."""
    selected = pod.node_selector().get(label)
    if selected is not None and not isinstance(selected, str):
        raise MalformedObject((*pod.location.spec, "nodeSelector", label), "must be a string")
    from_affinity = _affinity_models(pod, label)
    if selected is None:
        return from_affinity
    if from_affinity is None:
        return {selected}
    return {selected} & from_affinity


def _affinity_models(pod: PodView, label: str) -> set[str] | None:
    """Models allowed by a required node affinity. Terms are ORed, so the pod is held to a set
    of models only when every term restricts the label with `In`."""
    terms = pod.required_node_selector_terms()
    if not terms:
        return None
    allowed: set[str] = set()
    for term in terms:
        values = _term_models(term, label)
        if values is None:
            return None
        allowed |= values
    return allowed


def _term_models(term: Any, label: str) -> set[str] | None:
    if not isinstance(term, Mapping):
        return None
    expressions = term.get("matchExpressions") or []
    restricted: set[str] | None = None
    for expression in expressions if isinstance(expressions, list) else []:
        if not isinstance(expression, Mapping) or expression.get("key") != label:
            continue
        if expression.get("operator") != "In":
            continue
        values = {v for v in expression.get("values") or [] if isinstance(v, str)}
        restricted = values if restricted is None else restricted & values
    return restricted
