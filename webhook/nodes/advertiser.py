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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from webhook.kube import raw_json
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
from webhook.policy.model import Policy

log = logging.getLogger("webhook")

JSON_PATCH = "application/json-patch+json"
HTTP_UNPROCESSABLE = 422
PATCH_TIMEOUT = (5.0, 10.0)


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

    def summary(self, *, dry_run: bool) -> str:
        held = ", ".join(f"{resource} on {n}" for resource, n in sorted(self.advertised.items()))
        verb = "would patch" if dry_run else "patched"
        return (
            f"{self.nodes} nodes: {held or 'no VRAM resource'} advertised; {verb} "
            f"{self.patched}, skipped {self.skipped}, failed {self.failed}"
        )


class Advertiser:
    """The informer handler (`listed`, `changed`) that patches nodes. `policies` gives the set
    being served at each call. With `dry_run`, patches are written to `out`, not sent."""

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
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self._core = core
        self._policies = policies
        self._metrics = metrics
        self._events = events
        self._dry_run = dry_run
        self._out = out
        self._on_fatal = on_fatal
        self._stopping = stopping
        # The VRAM resources of the policies last served: one that no policy names any more is
        # withdrawn from every node, once this process has seen a policy name it.
        self._owned: set[str] = set()
        self._named: set[str] = set()
        self._lock = threading.Lock()
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._plans: dict[str, NodePlan] = {}
        self._said: dict[str, tuple[str, ...]] = {}

    # --- the informer's calls --------------------------------------------------------------

    def listed(self, objects: list[Mapping[str, Any]]) -> None:
        with self._fatal_reported():
            self._replace(objects)
            self.reconcile_all()

    def changed(self, event_type: str, obj: Mapping[str, Any]) -> None:
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

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        with self._lock:
            self._nodes = {}
            for node in objects:
                name = (node.get("metadata") or {}).get("name")
                if isinstance(name, str) and name:
                    self._nodes[name] = slim(node)
            for gone in set(self._plans) - set(self._nodes):
                self._forget(gone)

    def _change(self, event_type: str, obj: Mapping[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            return
        with self._lock:
            if event_type == "DELETED":
                self._nodes.pop(name, None)
                self._forget(name)
                self._publish()
                return
            self._nodes[name] = slim(obj)
            self._reconcile(obj, Tally())
            self._publish()

    # --- passes ------------------------------------------------------------------------------

    def reconcile_all(self) -> Tally:
        """Every node held, against the policies served now (after a reload, or a resync)."""
        tally = Tally()
        with self._lock:
            for node in list(self._nodes.values()):
                if self._stopping() or not self._reconcile(node, tally):
                    # An API that does not answer would cost each remaining node a timeout.
                    break
            self._publish()
        return tally

    def resync(self) -> Tally | None:
        """`reconcile_all` for the service's threads: a refusal to patch ends the service."""
        with self._fatal_reported():
            return self.reconcile_all()
        return None

    def once(self, nodes: list[Mapping[str, Any]]) -> Tally:
        """One pass over `nodes` (a LIST's items); raises Forbidden when RBAC refuses a patch."""
        self._replace(nodes)
        return self.reconcile_all()

    # --- one node ----------------------------------------------------------------------------

    def _reconcile(self, node_object: Mapping[str, Any], tally: Tally) -> bool:
        """Bring one node in line; False when the API did not answer, so the pass should end."""
        try:
            node = NodeView.of(node_object)
        except MalformedNode as error:
            log.warning("nodes: %s; skipped", error)
            tally.skipped += 1
            return True
        tally.nodes += 1
        policies = sharing_policies(self._policies())
        named = {sharing.vram_resource for _, sharing in policies}
        self._owned |= named
        self._named = named
        plan = plan_node(node, policies, retired=self._owned - named)
        self._plans[node.name] = plan
        self._say(plan)
        self._count(plan, tally)
        changes = needed_changes(node, plan)
        if not changes:
            return True
        operations = status_patch(node, changes)
        tally.patched += 1
        if self._dry_run:
            assert self._out is not None
            self._out.write(json.dumps({"node": node.name, "patch": operations}) + "\n")
            return True
        try:
            patched = raw_json.call(
                self._core.patch_node_status,
                node.name,
                operations,
                _content_type=JSON_PATCH,
                _request_timeout=PATCH_TIMEOUT,
            )
        except ApiException as error:
            if error.status == HTTP_FORBIDDEN:
                self._metrics.error("forbidden")
                raise Forbidden(
                    f"cannot patch nodes/status: {short_reason(error)}: grant the verb patch "
                    "on the resource nodes/status (deploy/base/advertiser-rbac.yaml)"
                ) from None
            if error.status == HTTP_UNPROCESSABLE:
                # The node changed since it was read (the patch tests its resourceVersion):
                # the watch brings the change, and the node is planned again then.
                tally.patched -= 1
                log.debug("node %s: changed meanwhile; waiting for the watch", node.name)
                return True
            self._failed(node.name, error, tally)
            return True
        except Exception as error:  # a dead connection: the next event or resync tries again
            self._failed(node.name, error, tally)
            return False
        # Held until the watch brings it, so that a resync meanwhile does not patch again.
        self._nodes[node.name] = slim(patched)
        self._metrics.patched()
        log.info("node %s: %s", node.name, describe(changes))
        if self._events is not None:
            self._events.advertised(node.name, describe(changes))
        return True

    def _failed(self, name: str, error: BaseException, tally: Tally) -> None:
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
        self._said[plan.node] = said
        for warning in plan.warnings:
            log.warning("node %s: %s", plan.node, warning)
        for problem in plan.problems:
            self._metrics.error("labels" if problem.startswith("labels") else "conflict")
            log.error("node %s: skipped: %s", plan.node, problem)
            if self._events is not None:
                self._events.skipped(plan.node, problem)

    def _forget(self, name: str) -> None:
        self._plans.pop(name, None)
        self._said.pop(name, None)

    def _publish(self) -> None:
        advertised = dict.fromkeys(self._named, 0)
        for plan in self._plans.values():
            for resource, resource_plan in plan.resources.items():
                if isinstance(resource_plan, Advertise) and resource in advertised:
                    advertised[resource] += 1
        self._metrics.nodes_advertised(advertised)


def slim(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """The parts of a Node that `NodeView` reads: a node's image list and conditions can be tens
    of KiB, and the advertiser holds every node of the cluster."""
    metadata = node.get("metadata")
    status = node.get("status")
    if not isinstance(metadata, Mapping) or not isinstance(status, Mapping):
        return node  # NodeView.of says what is wrong with it
    return {
        "metadata": {
            key: metadata[key] for key in ("name", "labels", "resourceVersion") if key in metadata
        },
        "status": {key: status[key] for key in ("capacity", "allocatable") if key in status},
    }
