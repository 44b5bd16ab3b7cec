"""What one node should advertise under a set of policies, and the JSON patch that gets it there.

Every VRAM resource a sharing policy names is owned here: a node in a policy's pool gets the
amount its cards hold in the policy's unit, a node outside every pool loses it, and a node whose
labels cannot be read keeps what it has. Resources no policy names are never touched. The patch
writes `status.capacity` and `status.allocatable` alike: a kubelet derives allocatable from
capacity on its next status update, but a node without a kubelet never would.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonpointer import JsonPointer

from webhook.nodes.gpu_labels import Cards, NoCards, Unreadable, read_gpus
from webhook.policy.model import MultiGpuNodes, Policy, Sharing
from webhook.quantity import same_amount

STATUS_MAPS = ("capacity", "allocatable")


class MalformedNode(ValueError):
    """A Node object without the shape the API gives every node."""


@dataclass(frozen=True, slots=True)
class NodeView:
    """The parts of a Node this module reads; `status` maps absent from the object are None."""

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, Any] | None
    allocatable: Mapping[str, Any] | None
    resource_version: str | None = None

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> NodeView:
        metadata = node.get("metadata")
        if not isinstance(metadata, Mapping):
            raise MalformedNode("a node without metadata")
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise MalformedNode("a node without metadata.name")
        labels = metadata.get("labels") or {}
        status = node.get("status") or {}
        if not isinstance(labels, Mapping) or not isinstance(status, Mapping):
            raise MalformedNode(f"node {name}: metadata.labels and status must be objects")
        maps = [status.get(key) for key in STATUS_MAPS]
        if any(value is not None and not isinstance(value, Mapping) for value in maps):
            raise MalformedNode(f"node {name}: status.capacity and allocatable must be objects")
        version = metadata.get("resourceVersion")
        return cls(name, labels, maps[0], maps[1], version if isinstance(version, str) else None)

    def status_map(self, key: str) -> Mapping[str, Any] | None:
        return self.capacity if key == "capacity" else self.allocatable


@dataclass(frozen=True)
class Advertise:
    amount: int
    how: str


@dataclass(frozen=True)
class Withdraw:
    """Not in any pool, or in one without cards to share: the resource goes if it is there."""

    reason: str


@dataclass(frozen=True)
class Leave:
    """Left as it is, because of `problem`."""

    problem: str


ResourcePlan = Advertise | Withdraw | Leave


@dataclass(frozen=True)
class NodePlan:
    node: str
    resources: Mapping[str, ResourcePlan]
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def sharing_policies(policies: Iterable[Policy]) -> list[tuple[str, Sharing]]:
    """The policies whose VRAM resource this product advertises: those of the ExtendedResource
    backend (the other backends' device plugins advertise what their pods ask for)."""
    return [
        (policy.name, policy.sharing)
        for policy in policies
        if policy.sharing is not None and policy.sharing.advertised
    ]


def plan_node(
    node: NodeView, policies: Sequence[tuple[str, Sharing]], retired: Iterable[str] = ()
) -> NodePlan:
    """What `node` should advertise of each VRAM resource the `(name, sharing)` pairs name, and
    of the `retired` resources that policies named before and name no more: nothing."""
    proposals: dict[str, list[tuple[str, ResourcePlan]]] = {}
    warnings: list[str] = []
    for name, sharing in policies:
        proposals.setdefault(sharing.vram_resource, [])
        selector = sharing.nodes.selector
        if selector is None or not selector.matches(node.labels):
            continue
        plan, warning = _policy_plan(node, sharing)
        proposals[sharing.vram_resource].append((name, plan))
        if warning:
            warnings.append(f'policy "{name}": {warning}')
    resources: dict[str, ResourcePlan] = {
        resource: Withdraw("no policy names it any more") for resource in retired
    }
    resources |= {resource: _settle(resource, proposed) for resource, proposed in proposals.items()}
    problems = tuple(plan.problem for plan in resources.values() if isinstance(plan, Leave))
    return NodePlan(node.name, resources, tuple(warnings), problems)


def _policy_plan(node: NodeView, sharing: Sharing) -> tuple[ResourcePlan, str | None]:
    gpus = read_gpus(node.labels, node.capacity or {}, sharing)
    if isinstance(gpus, Unreadable):
        return Leave(f"labels unreadable: {gpus.reason}"), None
    if isinstance(gpus, NoCards):
        return Withdraw(gpus.reason), None
    if gpus.count > 1 and not gpus.stated and sharing.nodes.multi_gpu is MultiGpuNodes.SKIP:
        reason = f"{gpus.count} cards, and the policy's nodes.multiGPU is Skip"
        return Withdraw(reason), f"{reason}: nothing advertised"
    known = sharing.models.get(gpus.model) if gpus.model is not None else None
    reserved = known.reserved_mib if known is not None else 0
    per_card = (gpus.card_mib - reserved) // sharing.mib_per_unit
    how = f"{gpus.source}, in {sharing.unit}"
    if reserved:
        how = f"{how}, less the {reserved} MiB the driver keeps"
    warning = _catalogue_warning(gpus, sharing)
    if gpus.count > 1 and not gpus.stated:
        spread = f"{gpus.count} cards summed (nodes.multiGPU: Sum): shares may add up past one card"
        warning = f"{warning}; {spread}" if warning else spread
    return Advertise(per_card * gpus.count, how), warning


def _catalogue_warning(gpus: Cards, sharing: Sharing) -> str | None:
    """Shares are sized from the catalogue; a card with less memory than it says cannot hold
    n shares of 1/n, so say so where the node's own figure is smaller."""
    known = sharing.models.get(gpus.model) if gpus.model is not None else None
    if known is None or known.memory_mib <= gpus.card_mib:
        return None
    return (
        f"{gpus.model} reports {gpus.card_mib} MiB per card but the catalogue says "
        f"{known.memory_mib}: shares sized from the catalogue may not fit; set its memoryMiB "
        f"to {gpus.card_mib}"
    )


def _settle(resource: str, proposed: list[tuple[str, ResourcePlan]]) -> ResourcePlan:
    """One plan for a resource that several policies' pools may claim on the same node."""
    if not proposed:
        return Withdraw("in no policy's node pool")
    leave = next((plan for _, plan in proposed if isinstance(plan, Leave)), None)
    if leave is not None:
        return leave
    amounts = [plan.amount for _, plan in proposed if isinstance(plan, Advertise)]
    if len(set(amounts)) > 1 or (amounts and len(amounts) < len(proposed)):
        names = ", ".join(f'"{name}"' for name, _ in proposed)
        return Leave(f"policies {names} claim the node for {resource} with different amounts")
    return proposed[0][1]


def needed_changes(node: NodeView, plan: NodePlan) -> dict[str, Advertise | Withdraw]:
    """The resources whose capacity or allocatable is not yet what `plan` says."""
    changes: dict[str, Advertise | Withdraw] = {}
    for resource, resource_plan in sorted(plan.resources.items()):
        held = [node.status_map(key) or {} for key in STATUS_MAPS]
        if isinstance(resource_plan, Advertise):
            if not all(same_amount(found.get(resource), resource_plan.amount) for found in held):
                changes[resource] = resource_plan
        elif isinstance(resource_plan, Withdraw) and any(resource in found for found in held):
            changes[resource] = resource_plan
    return changes


def status_patch(
    node: NodeView, changes: Mapping[str, Advertise | Withdraw]
) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) of `nodes/status` that makes `changes`, touching no other
    resource: `add` sets a member whether or not it is there, `remove` only one that is. It
    first tests the node's resourceVersion, so a patch planned on a node that has changed
    since (a kubelet's write, a stale watch event) is refused rather than applied."""
    operations: list[dict[str, Any]] = []
    if node.resource_version is not None:
        pointer = JsonPointer.from_parts(["metadata", "resourceVersion"]).path
        operations.append({"op": "test", "path": pointer, "value": node.resource_version})
    for key in STATUS_MAPS:
        current = node.status_map(key)
        whole_map: dict[str, str] = {}
        for resource, change in changes.items():
            pointer = JsonPointer.from_parts(["status", key, resource]).path
            if isinstance(change, Withdraw):
                if current is not None and resource in current:
                    operations.append({"op": "remove", "path": pointer})
            elif current is None:
                whole_map[resource] = str(change.amount)
            elif not same_amount(current.get(resource), change.amount):
                operations.append({"op": "add", "path": pointer, "value": str(change.amount)})
        if whole_map:
            pointer = JsonPointer.from_parts(["status", key]).path
            operations.append({"op": "add", "path": pointer, "value": whole_map})
    return operations


def describe(changes: Mapping[str, Advertise | Withdraw]) -> str:
    """One line on what `changes` do, with why."""
    return "; ".join(
        f"{resource}={change.amount} ({change.how})"
        if isinstance(change, Advertise)
        else f"{resource} removed ({change.reason})"
        for resource, change in changes.items()
    )
