"""Keeps every node's VRAM resources as `node_plan` says: once over a list, or for each node the
watch reports, and for all of them again when the policies change or a resync is due.

A node is patched only when its status differs from the plan, so the watch event a patch causes
changes nothing, and a kubelet that zeroes the resource on re-registration is answered at once.
What a node is warned of is logged when it changes, not at every status update of the node.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from webhook.kube.api_errors import HTTP_FORBIDDEN, short_reason
from webhook.nodes.advertiser_metrics import AdvertiserMetrics
from webhook.nodes.node_events import NodeEvents
from webhook.nodes.node_plan import (
    Advertise,
    MalformedNode,
    NodePlan,
    NodeView,
    describe,
    needed_changes,
    plan_node,
    sharing_policies,
    status_patch,
)
from webhook.nodes.node_reading import NodeKeeper, NodeReading
from webhook.nodes.patch_limits import PatchLimits
from webhook.nodes.status_patches import PatchDone, PatchRequest, StatusPatcher, Stopped
from webhook.policy.model import Policy, Sharing

log = logging.getLogger("webhook")

# What the informer holds of a node: its view, and the reading it was kept under.
KeptNode = tuple[NodeReading, NodeView]
NOTHING: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PlanBasis:
    """What one set of policies plans with: the sharing policies, the resources they no longer
    name, and the keeper of what they read. A pass takes one and plans every node with it, so a
    reload during the pass cannot plan a node with policies its view was not kept for."""

    sharing: list[tuple[str, Sharing]]
    retired: frozenset[str]
    keeper: NodeKeeper

    @property
    def reading(self) -> NodeReading:
        return self.keeper.reading


HTTP_UNPROCESSABLE = 422


class Forbidden(Exception):
    """The API refused a call for want of RBAC; `str()` names the verb and the resource."""


@dataclass
class Tally:
    """What one pass over the nodes did, for the summary line."""

    advertised: dict[str, int] = field(default_factory=dict)
    nodes: int = 0
    patched: int = 0
    skipped: int = 0
    failed: int = 0
    # The policies read what the nodes were not kept with: they are listed again instead.
    relisting: bool = False

    def summary(self, *, dry_run: bool) -> str:
        if self.relisting:
            return "the nodes are listed again for the policies now served"
        held = ", ".join(f"{resource} on {n}" for resource, n in sorted(self.advertised.items()))
        verb = "would patch" if dry_run else "patched"
        return (
            f"{self.nodes} nodes: {held or 'no VRAM resource'} advertised; {verb} "
            f"{self.patched}, skipped {self.skipped}, failed {self.failed}"
        )


class Advertiser:
    """The informer handler (`keep`, `listed`, `changed`) that patches nodes. `policies` gives
    the set being served at each call. With `dry_run`, patches are written to `out`, not sent.
    `watched_by` gives it the informer's `relist`, called when the policies come to read what
    the nodes were not kept with."""

    def __init__(
        self,
        core: CoreV1Api,
        policies: Callable[[], Sequence[Policy]],
        *,
        metrics: AdvertiserMetrics,
        events: NodeEvents | None = None,
        dry_run: bool = False,
        out: TextIO | None = None,
        on_fatal: Callable[[str], None] | None = None,
        stopping: threading.Event | None = None,
        limits: PatchLimits | None = None,
    ) -> None:
        self._policies = policies
        self._metrics = metrics
        self._events = events
        self._dry_run = dry_run
        self._out = out
        self._on_fatal = on_fatal
        self._stopping = stopping or threading.Event()
        self._patcher = StatusPatcher(core, limits or PatchLimits(), stopping=self._stopping)
        self._request_relist: Callable[[], None] | None = None
        # The VRAM resources of the policies last served: one that no policy names any more is
        # withdrawn from every node, once this process has seen a policy name it.
        self._owned: set[str] = set()
        self._named: set[str] = set()
        self._served_policies: Sequence[Policy] | None = None
        self._basis: PlanBasis | None = None
        # The informer's thread keeps nodes while a pass may hold `_lock`.
        self._reading_lock = threading.RLock()
        self._relist_asked = False
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeView] = {}
        self._held_reading: NodeReading | None = None
        # Per node only what differs from the usual: the resources it advertises, what it was
        # last warned of. Equal sets are one object.
        self._advertising: dict[str, frozenset[str]] = {}
        self._shared_sets: dict[frozenset[str], frozenset[str]] = {}
        self._counts: Counter[str] = Counter()
        self._said: dict[str, tuple[str, ...]] = {}

    def watched_by(self, relist: Callable[[], None]) -> None:
        self._request_relist = relist

    # --- the informer's calls --------------------------------------------------------------

    def keep(self, node: Mapping[str, Any]) -> KeptNode | None:
        """What is held of a node: its view under the reading the policies ask for now."""
        keeper = self._basis_now().keeper
        try:
            return keeper.reading, keeper.view(node)
        except MalformedNode as error:
            log.warning("nodes: %s; skipped", error)
            return None

    def listed(self, objects: list[KeptNode]) -> None:
        with self._fatal_reported():
            self._replace(objects)
            self.reconcile_all()

    def changed(self, event_type: str, obj: KeptNode) -> None:
        with self._fatal_reported():
            self._change(event_type, obj)

    @contextmanager
    def _fatal_reported(self) -> Iterator[None]:
        """On the informer's thread a refusal to patch ends the service, not only this pass."""
        try:
            yield
        except Forbidden as error:
            if self._on_fatal is None:
                raise
            self._on_fatal(str(error))

    def _replace(self, kept: list[KeptNode]) -> None:
        with self._lock:
            readings = {reading for reading, _ in kept} or {self._basis_now().reading}
            # Mixed readings (the policies changed during the list) are held as stale.
            self._held_reading = readings.pop() if len(readings) == 1 else None
            self._relist_asked = False
            self._nodes = {view.name: view for _, view in kept}
            for gone in [name for name in self._advertising if name not in self._nodes]:
                self._forget(gone)
            for gone in [name for name in self._said if name not in self._nodes]:
                self._said.pop(gone)

    def _change(self, event_type: str, kept: KeptNode) -> None:
        reading, node = kept
        with self._lock:
            if event_type == "DELETED":
                self._nodes.pop(node.name, None)
                self._forget(node.name)
                self._said.pop(node.name, None)
                self._publish()
                return
            self._nodes[node.name] = node
            basis = self._basis_now()
            if self._needs_relist(basis.reading) or (
                reading != basis.reading and self._request_relist is not None
            ):
                # Kept under other policies than those served now: planned after a new list.
                self._ask_relist()
                return
            tally = Tally()
            request = self._reconcile(node, tally, basis)
            if request is not None:
                self._settle(self._patcher.send(request), tally, basis)
            self._publish()

    # --- passes ------------------------------------------------------------------------------

    def reconcile_all(self) -> Tally:
        """Every node held, against the policies served now (after a reload, or a resync)."""
        tally = Tally()
        with self._lock:
            basis = self._basis_now()
            if self._needs_relist(basis.reading):
                self._ask_relist()
                tally.relisting = True
                return tally
            with self._patcher.batch() as batch:
                answered = True
                for node in list(self._nodes.values()):
                    if self._stopping.is_set() or not answered:
                        break
                    request = self._reconcile(node, tally, basis)
                    if request is not None:
                        answered = self._settle_all(batch.submit(request), tally, basis)
                self._settle_all(batch.finish(), tally, basis)
            self._publish()
        return tally

    def resync(self) -> Tally | None:
        """`reconcile_all` for the service's threads: a refusal to patch ends the service."""
        with self._fatal_reported():
            return self.reconcile_all()
        return None

    def once(self, nodes: list[KeptNode]) -> Tally:
        """One pass over `nodes` (what `keep` made of a LIST's items); raises Forbidden when
        RBAC refuses a patch."""
        self._replace(nodes)
        return self.reconcile_all()

    def _needs_relist(self, reading: NodeReading) -> bool:
        """Whether the nodes held were kept under another reading than `reading`: then they are
        listed again, and planned when the list comes, not before. Without an informer (one
        pass) the policies do not change."""
        return reading != self._held_reading and self._request_relist is not None

    def _ask_relist(self) -> None:
        """Ask the informer for a new list, once until it comes."""
        if self._request_relist is not None and not self._relist_asked:
            self._relist_asked = True
            log.info("nodes: the policies read other labels or resources; listing the nodes again")
            self._request_relist()

    # --- one node ----------------------------------------------------------------------------

    def _reconcile(self, node: NodeView, tally: Tally, basis: PlanBasis) -> PatchRequest | None:
        """Plan one node; the patch that brings it in line, if it needs one and may be sent."""
        tally.nodes += 1
        plan = plan_node(node, basis.sharing, retired=basis.retired)
        self._remember(plan)
        self._say(plan)
        self._count(plan, tally)
        changes = needed_changes(node, plan)
        if not changes:
            return None
        operations = status_patch(node, changes)
        tally.patched += 1
        if self._dry_run:
            assert self._out is not None
            self._out.write(json.dumps({"node": node.name, "patch": operations}) + "\n")
            return None
        return PatchRequest(node, operations, changes)

    def _settle_all(self, answers: list[PatchDone], tally: Tally, basis: PlanBasis) -> bool:
        answered = True
        for done in answers:
            answered = self._settle(done, tally, basis) and answered
        return answered

    def _settle(self, done: PatchDone, tally: Tally, basis: PlanBasis) -> bool:
        """Take in a patch's answer; False when the API did not answer, so the pass should end
        (an API that does not answer would cost each remaining node a timeout)."""
        name = done.request.node.name
        error = done.error
        if isinstance(error, ApiException):
            if error.status == HTTP_FORBIDDEN:
                self._metrics.error("forbidden")
                raise Forbidden(
                    f"cannot patch nodes/status: {short_reason(error)}: grant the verb patch "
                    "on the resource nodes/status (deploy/base/advertiser-rbac.yaml)"
                )
            if error.status == HTTP_UNPROCESSABLE:
                # The node changed since it was read (the patch tests its resourceVersion):
                # the watch brings the change, and the node is planned again then.
                tally.patched -= 1
                log.debug("node %s: changed meanwhile; waiting for the watch", name)
                return True
            self._failed(name, error, tally)
            return True
        if isinstance(error, Stopped):
            tally.patched -= 1
            return False
        if error is not None:  # a dead connection: the next event or resync tries again
            self._failed(name, error, tally)
            return False
        assert done.patched is not None
        if name in self._nodes:
            # Held until the watch brings it, so that a resync meanwhile does not patch again.
            self._nodes[name] = basis.keeper.view(done.patched)
        self._metrics.patched()
        said = describe(done.request.changes)
        log.info("node %s: %s", name, said)
        if self._events is not None:
            self._events.advertised(name, said)
        return True

    def _failed(self, name: str, error: BaseException, tally: Tally) -> None:
        tally.patched -= 1
        tally.failed += 1
        self._metrics.patch_failed()
        log.warning("node %s: the patch failed (%s); trying again later", name, short_reason(error))

    def _count(self, plan: NodePlan, tally: Tally) -> None:
        for resource, resource_plan in plan.resources.items():
            if isinstance(resource_plan, Advertise):
                tally.advertised[resource] = tally.advertised.get(resource, 0) + 1
        if plan.problems:
            tally.skipped += 1

    def _say(self, plan: NodePlan) -> None:
        """Log a node's warnings and problems when they differ from what was said last."""
        said = (*plan.warnings, *plan.problems)
        if self._said.get(plan.node, ()) == said:
            return
        if said:
            self._said[plan.node] = said
        else:
            self._said.pop(plan.node, None)
        for warning in plan.warnings:
            log.warning("node %s: %s", plan.node, warning)
        for problem in plan.problems:
            self._metrics.error("labels" if problem.startswith("labels") else "conflict")
            log.error("node %s: skipped: %s", plan.node, problem)
            if self._events is not None:
                self._events.skipped(plan.node, problem)

    # --- what is held ------------------------------------------------------------------------

    def _basis_now(self) -> PlanBasis:
        """The basis the policies served now plan with; the VRAM resources named and owned
        follow them."""
        with self._reading_lock:
            policies = self._policies()
            if self._basis is None or policies is not self._served_policies:
                sharing = sharing_policies(policies)
                self._named = {found.vram_resource for _, found in sharing}
                self._owned |= self._named
                reading = NodeReading.of(sharing, self._owned)
                held = self._basis
                keeper = held.keeper if held and held.reading == reading else NodeKeeper(reading)
                self._basis = PlanBasis(sharing, frozenset(self._owned - self._named), keeper)
                self._served_policies = policies
            return self._basis

    def _remember(self, plan: NodePlan) -> None:
        advertised = frozenset(
            name for name, planned in plan.resources.items() if isinstance(planned, Advertise)
        )
        held = self._advertising.get(plan.node, NOTHING)
        if advertised == held:
            return
        self._counts.subtract(held)
        self._counts.update(advertised)
        if advertised:
            self._advertising[plan.node] = self._shared_sets.setdefault(advertised, advertised)
        else:
            self._advertising.pop(plan.node, None)

    def _forget(self, name: str) -> None:
        self._counts.subtract(self._advertising.pop(name, NOTHING))

    def _publish(self) -> None:
        self._metrics.nodes_advertised({name: self._counts[name] for name in self._named})
