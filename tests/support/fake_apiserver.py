"""A thin fake of the kube-apiserver: only the endpoints the label cache and the certificate Job
call, answered in the shapes the real API uses, over plain HTTP on 127.0.0.1.

- `GET /api/v1/namespaces`: a NamespaceList (items without kind and apiVersion, as the real
  list encodes them) at the current resourceVersion.
- `GET /api/v1/namespaces?watch=true&resourceVersion=N`: HTTP 200 and a chunked stream of
  newline-delimited watch events after N. A version older than the watch history gets one ERROR
  event carrying a 410 `Expired` Status and the end of the stream, as the watch cache answers.
  Without a version (or "0") the stream starts with an ADDED event per namespace. With
  `timeoutSeconds` the stream ends then, after a BOOKMARK when `allowWatchBookmarks=true`.
- `GET /api/v1/namespaces/{name}`: the Namespace, or the 404 `NotFound` Status.
- `GET /api/v1/pods`, `/apis/apps/v1/deployments` and the other lists of WORKLOAD_PATHS across
  namespaces, and the namespace and node lists: a page of `limit` items with an opaque
  `metadata.continue` while more are left. Later pages come from the first page's snapshot,
  writes since notwithstanding, until `expire_list_snapshots()` (etcd's compaction) makes the
  token 410 `Expired`.
- `GET /api/v1/nodes` (paged, and with `watch=true` as for namespaces), `GET /api/v1/nodes/{name}`
  and a JSON `PATCH` of `/api/v1/nodes/{name}/status`, which `throttle_patches` can answer 429
  with a Retry-After. `node_padding` is sent as every node's `status.images` without being held,
  and `history_limit` bounds the watch history as the watch cache's capacity does.
- `GET /api`, `/api/v1`, `/apis` and `/apis/{group}/{version}`: discovery (APIVersions,
  APIGroupList, APIResourceList) of those workload lists, as the cluster serves them: a test
  may move one to another version (`serve_at`, as v1.20 served CronJobs in batch/v1beta1).
- `POST /api/v1/namespaces/{ns}/secrets`: 201 and the Secret, or 409 `AlreadyExists`.
- `GET` and `PUT /api/v1/namespaces/{ns}/secrets/{name}`: a PUT whose resourceVersion is not the
  stored one gets 409 `Conflict`; one without a resourceVersion is unconditional, as for Secrets.
- `GET` and `PATCH /apis/admissionregistration.k8s.io/v1/{mutating,validating}webhookconfigurations/
  {name}`: a PATCH must be `application/json-patch+json` (anything else is 415 here) and is
  applied with `jsonpatch`; a patch that does not apply (a failed `test`) is 422 `Invalid`.
- `/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates[/{name}]`: POST (201, or 409
  `AlreadyExists`), GET, a merge PATCH, and a DELETE whose `preconditions.resourceVersion` must be
  the stored one (409 `Conflict`); the list, across namespaces too, by a `key=value` labelSelector.
  With `claim_templates_served = False`, 404 as from a cluster before 1.34.

Every request is recorded with its method, path, query, content type and decoded body. A write
moves the resourceVersion only when it changes the object, as an apiserver skips no-op writes.

Test code changes namespaces (each change moves the resourceVersion and reaches open watches),
can delay watch delivery, stall named reads, expire the watch history, and stop and restart the
server on the same port; state survives a restart, as etcd outlives an apiserver.
"""

from __future__ import annotations

import collections
import copy
import json
import queue
import re
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import jsonpatch
import jsonpointer
import yaml

NAMESPACES_PATH = "/api/v1/namespaces"
SECRETS_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/secrets(?:/([^/]+))?$")
ADMISSION_GROUP = "admissionregistration.k8s.io"
WEBHOOKS_PATH = re.compile(
    rf"^/apis/{re.escape(ADMISSION_GROUP)}/v1/(mutating|validating)webhookconfigurations/([^/]+)$"
)
WEBHOOK_KINDS = {
    "mutating": "MutatingWebhookConfiguration",
    "validating": "ValidatingWebhookConfiguration",
}
NODES_PATH = "/api/v1/nodes"
NODE_PATH = re.compile(r"^/api/v1/nodes/([^/]+)(/status)?$")
COORDINATION_GROUP = "coordination.k8s.io"
LEASES_PATH = re.compile(
    rf"^/apis/{re.escape(COORDINATION_GROUP)}/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$"
)
EVENTS_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")
RESOURCE_GROUP = "resource.k8s.io"
CLAIM_TEMPLATES_PATH = re.compile(
    rf"^/apis/{re.escape(RESOURCE_GROUP)}/v1/(?:namespaces/([^/]+)/)?resourceclaimtemplates"
    r"(?:/([^/]+))?$"
)
MERGE_PATCH = "application/merge-patch+json"
# The workloads listed across namespaces, as `scan` reads them: path -> (apiVersion, list kind).
WORKLOAD_PATHS = {
    "/api/v1/pods": ("v1", "PodList"),
    "/api/v1/podtemplates": ("v1", "PodTemplateList"),
    "/api/v1/replicationcontrollers": ("v1", "ReplicationControllerList"),
    "/apis/apps/v1/deployments": ("apps/v1", "DeploymentList"),
    "/apis/apps/v1/statefulsets": ("apps/v1", "StatefulSetList"),
    "/apis/apps/v1/daemonsets": ("apps/v1", "DaemonSetList"),
    "/apis/apps/v1/replicasets": ("apps/v1", "ReplicaSetList"),
    "/apis/batch/v1/jobs": ("batch/v1", "JobList"),
    "/apis/batch/v1/cronjobs": ("batch/v1", "CronJobList"),
}
JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
NAME_LABEL = "kubernetes.io/metadata.name"
COLLECTIONS = {"Namespace": "namespaces", "Node": "nodes"}
# Lists paged at once: as many snapshots are held, the oldest dropped first.
MAX_SNAPSHOTS = 16
LIST_DROPS = frozenset(("kind", "apiVersion"))
PADDING_MARK = "\u0000node-padding\u0000"
PADDING_MARK_JSON = json.dumps(PADDING_MARK).encode()
MAX_ENCODED = 1_000_000
LIST_KINDS = {"namespaces": "NamespaceList", "nodes": "NodeList"}
# Who the fake's clients are, in the messages of forbidden requests.
FORBIDDEN_USER = "system:serviceaccount:gpu-admission:gpu-vram-advertiser"
TRUE_WORDS = {"1", "t", "T", "true", "TRUE", "True"}
FALSE_WORDS = {"0", "f", "F", "false", "FALSE", "False"}

Event = dict[str, Any]
T = TypeVar("T")


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: Mapping[str, str]
    content_type: str | None = None
    # The JSON body decoded, or its text when it is not JSON; None without a body.
    body: Any = None
    token: str | None = None

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch", "") in TRUE_WORDS

    @property
    def is_list(self) -> bool:
        return self.path == NAMESPACES_PATH and not self.is_watch


def status(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> Event:
    """A metav1.Status as the API encodes a failure."""
    body: Event = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return body


class FakeApiServer:
    def __init__(self, *, token: str | None = None, first_resource_version: int = 1000) -> None:
        self.token = token
        # More clients, each known by its own token in what it asked (RecordedRequest.token).
        self._other_tokens: set[str] = set()
        self._lock = threading.RLock()
        # The kinds a client may list and watch, by their collection's name in the path.
        self._namespaces: dict[str, Event] = {}
        self._nodes: dict[str, Event] = {}
        self._workloads: dict[str, list[Event]] = {path: [] for path in WORKLOAD_PATHS}
        # The workload lists served, by path: (apiVersion, list kind).
        self._served: dict[str, tuple[str, str]] = dict(WORKLOAD_PATHS)
        self._watched = {"namespaces": self._namespaces, "nodes": self._nodes}
        self._version = first_resource_version
        self._history: collections.deque[tuple[int, str, Event]] = collections.deque()
        self._oldest_watchable = first_resource_version
        self._watchers: dict[queue.Queue[Event | None], str] = {}
        self._held_events: list[tuple[str, Event]] | None = None
        self._reads_released = threading.Event()
        self._reads_released.set()
        self._requests: list[RecordedRequest] = []
        self._secrets: dict[tuple[str, str], Event] = {}
        self._webhook_configurations: dict[tuple[str, str], Event] = {}
        self._leases: dict[tuple[str, str], Event] = {}
        self._claim_templates: dict[tuple[str, str], Event] = {}
        # The apiserver's DRAConsumableCapacity gate: off, it drops capacity requests.
        self.consumable_capacity = True
        # False: a cluster before 1.34, whose apiserver answers 404 under resource.k8s.io/v1.
        self.claim_templates_served = True
        self._events: list[Event] = []
        self._forbidden: set[tuple[str, str]] = set()
        self._hooks: list[tuple[str, str, Callable[[], object]]] = []
        self._httpd: _Httpd | None = None
        self.port = 0
        # 429s still to answer node status patches with, and the Retry-After they carry.
        self._throttled_patches = 0
        self._retry_after = 1
        # Seconds each node status patch takes before it is answered, as an etcd write does.
        self.write_latency = 0.0
        # Sent as every node's status.images, and never held per node: a cluster's nodes of
        # 10 to 30 KiB each cost the fake nothing to hold.
        self.node_padding: Any = None
        # The watch cache's capacity: past it the oldest events go, and a watch from before
        # them gets 410 Expired (None: every event is kept).
        self.history_limit: int | None = None
        # The snapshots that `continue` tokens page through, by their number.
        self._snapshots: dict[int, list[Event]] = {}
        self._snapshot_numbers = 0
        # Stored objects as lists carry them, by id() (the object is kept beside, so that an
        # id reused by another object is told apart), and the padding as JSON.
        self._encoded: dict[int, tuple[Event, bytes]] = {}
        self._padding: tuple[Any, bytes] | None = None

    # --- running -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self._lock:
            # A fresh apiserver's watch cache starts at the current version.
            self._history.clear()
            self._oldest_watchable = self._version
        self._httpd = _Httpd(("127.0.0.1", self.port), self)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        """Go away at once, as a crashed apiserver does: open connections are cut."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.closed.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.cut_connections()
        with self._lock:
            self._watchers.clear()

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> FakeApiServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: Path, token: str | None = None) -> Path:
        """A kubeconfig for this server; with `token`, for a client of its own."""
        if token is not None:
            with self._lock:
                self._other_tokens.add(token)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": token or self.token or "unused"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
            "current-context": "fake",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        return path

    # --- what was asked ------------------------------------------------------------------

    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def lists(self) -> list[RecordedRequest]:
        return [r for r in self.requests() if r.is_list]

    def watches(self) -> list[RecordedRequest]:
        return [r for r in self.requests() if r.is_watch]

    def reads(self, name: str | None = None) -> list[RecordedRequest]:
        """Reads of one namespace (not of the objects in it)."""
        prefix = NAMESPACES_PATH + "/"
        return [
            r
            for r in self.requests()
            if r.path.startswith(prefix)
            and "/" not in r.path.removeprefix(prefix)
            and (name is None or r.path == prefix + name)
        ]

    def writes(self) -> list[RecordedRequest]:
        """Every request that is not a GET."""
        return [r for r in self.requests() if r.method != "GET"]

    def open_watches(self) -> int:
        with self._lock:
            return len(self._watchers)

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._version)

    # --- changing the cluster ------------------------------------------------------------

    def add_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> Event:
        with self._lock:
            namespace = {
                "kind": "Namespace",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": "",
                    "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "labels": _namespace_labels(name, labels or {}),
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
            self._namespaces[name] = namespace
            return _copy(self._emit("ADDED", namespace))

    def set_labels(self, name: str, labels: Mapping[str, str]) -> Event:
        with self._lock:
            namespace = _copy(self._namespaces[name])
            namespace["metadata"]["labels"] = _namespace_labels(name, labels)
            self._namespaces[name] = namespace
            return _copy(self._emit("MODIFIED", namespace))

    def delete_namespace(self, name: str) -> Event:
        """Deleted at once: the Terminating phase and the finalizers are not played out."""
        with self._lock:
            namespace = _copy(self._namespaces.pop(name))
            namespace["metadata"]["deletionTimestamp"] = datetime.now(UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            )
            namespace["spec"]["finalizers"] = []
            namespace["status"]["phase"] = "Terminating"
            return _copy(self._emit("DELETED", namespace))

    def advance(self, writes: int = 1) -> str:
        """Writes to other resources move the cluster's resourceVersion on."""
        with self._lock:
            self._version += writes
            return str(self._version)

    def expire_watches(self, changes: Callable[[], object] | None = None) -> None:
        """Close every open watch, make `changes` while none is open, then drop the watch
        history: a watch resumed from any version seen so far gets 410 Expired."""
        with self._lock:
            for watcher in self._watchers:
                watcher.put(None)
            self._watchers.clear()
            if changes is not None:
                changes()
            self._version += 1
            self._history.clear()
            self._oldest_watchable = self._version

    @contextmanager
    def delayed_watch_events(self) -> Iterator[None]:
        """Watch events wait until the block ends, as they do behind a lagging watch cache."""
        with self._lock:
            self._held_events = []
        try:
            yield
        finally:
            with self._lock:
                held, self._held_events = self._held_events or [], None
                for collection, event in held:
                    self._deliver(collection, event)

    @contextmanager
    def stalled_reads(self) -> Iterator[None]:
        """`GET /api/v1/namespaces/{name}` is read at once but answered when the block ends."""
        self._reads_released.clear()
        try:
            yield
        finally:
            self._reads_released.set()

    # --- Nodes, Leases, Events and RBAC, as test code sees them ---------------------------

    def add_node(self, node: Mapping[str, Any]) -> Event:
        """Register a node (a v1/Node manifest, as in tests/fixtures/node-labels)."""
        with self._lock:
            body = json.loads(json.dumps(dict(node)))
            body.setdefault("kind", "Node")
            body.setdefault("apiVersion", "v1")
            metadata = body.setdefault("metadata", {})
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            body.setdefault("status", {}).setdefault("capacity", {"cpu": "8", "pods": "110"})
            body["status"].setdefault("allocatable", dict(body["status"]["capacity"]))
            self._nodes[metadata["name"]] = body
            return _copy(self._emit("ADDED", body))

    def node(self, name: str) -> Event:
        with self._lock:
            return _copy(self._nodes[name])

    def change_node(self, name: str, change: Callable[[Event], object]) -> Event:
        """Change a node as another writer would (a labeller, a kubelet): `change` edits it."""
        with self._lock:
            node = _copy(self._nodes[name])
            change(node)
            self._nodes[name] = node
            return _copy(self._emit("MODIFIED", node))

    def delete_node(self, name: str) -> Event:
        with self._lock:
            return _copy(self._emit("DELETED", _copy(self._nodes.pop(name))))

    def leases(self) -> dict[tuple[str, str], Event]:
        with self._lock:
            return _copy(self._leases)

    def events(self) -> list[Event]:
        with self._lock:
            return _copy(self._events)

    def forbid(self, verb: str, resource: str) -> None:
        """Answer `verb` on `resource` (`nodes/status` for a subresource) with 403 Forbidden."""
        with self._lock:
            self._forbidden.add((verb, resource))

    # --- Secrets and webhook configurations, as test code sees them ----------------------

    def put_secret(self, namespace: str, secret: Mapping[str, Any]) -> Event:
        """Store `secret` as another writer would, creating or replacing it."""
        with self._lock:
            body = json.loads(json.dumps(secret))
            name = body["metadata"]["name"]
            return self._store(self._secrets, (namespace, name), body, namespace)

    def secret(self, namespace: str, name: str) -> Event | None:
        with self._lock:
            return _copy(self._secrets.get((namespace, name)))

    def claim_templates(self) -> dict[tuple[str, str], Event]:
        """The ResourceClaimTemplates stored, by namespace and name."""
        with self._lock:
            return {key: _copy(obj) for key, obj in self._claim_templates.items()}

    def put_claim_template(self, namespace: str, template: Mapping[str, Any]) -> Event:
        with self._lock:
            key = (namespace, template["metadata"]["name"])
            return self._store(self._claim_templates, key, dict(template), namespace, typed=False)

    def add_webhook_configuration(
        self, kind: str, name: str, webhooks: list[Mapping[str, Any]]
    ) -> Event:
        """Store a `kind` ("mutating" or "validating") webhook configuration."""
        body = {
            "kind": WEBHOOK_KINDS[kind],
            "apiVersion": f"{ADMISSION_GROUP}/v1",
            "metadata": {"name": name},
            "webhooks": json.loads(json.dumps(webhooks)),
        }
        with self._lock:
            return self._store(self._webhook_configurations, (kind, name), body, None)

    def webhook_configuration(self, kind: str, name: str) -> Event | None:
        with self._lock:
            return _copy(self._webhook_configurations.get((kind, name)))

    def before_next(self, method: str, path: str, action: Callable[[], object]) -> None:
        """Run `action` once, when the next `method` request for `path` arrives and before it
        is answered: another writer that gets in between a client's read and its write."""
        with self._lock:
            self._hooks.append((method, path, action))

    # --- serving (handler threads) -------------------------------------------------------

    def run_hooks(self, method: str, path: str) -> None:
        with self._lock:
            due = [hook for hook in self._hooks if hook[:2] == (method, path)]
            self._hooks = [hook for hook in self._hooks if hook not in due]
        for _, _, action in due:
            action()

    def knows(self, token: str | None) -> bool:
        with self._lock:
            return token == self.token or token in self._other_tokens

    def denial(self, method: str, path: str, query: Mapping[str, str]) -> Event | None:
        """The 403 Status the authorizer answers for a forbidden request, else None."""
        node = NODE_PATH.match(path)
        leases = LEASES_PATH.match(path)
        events = EVENTS_PATH.match(path)
        name = ""
        namespace = None
        group = ""
        if path == NODES_PATH:
            resource = "nodes"
        elif node:
            resource, name = ("nodes/status" if node[2] else "nodes"), node[1]
        elif leases:
            resource, namespace, name, group = (
                "leases",
                leases[1],
                leases[2] or "",
                COORDINATION_GROUP,
            )
        elif events:
            resource, namespace = "events", events[1]
        elif templates := CLAIM_TEMPLATES_PATH.match(path):
            resource, namespace, name = "resourceclaimtemplates", templates[1], templates[2] or ""
            group = RESOURCE_GROUP
        elif path in self._served:
            parts = path.strip("/").split("/")
            resource, group = parts[-1], "" if parts[0] == "api" else parts[1]
        else:
            return None
        if method == "GET":
            watching = query.get("watch", "false") in TRUE_WORDS
            verb = "watch" if watching else "get" if name else "list"
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, "delete")
        with self._lock:
            if (verb, resource) not in self._forbidden:
                return None
        # As the apiserver's forbiddenMessage and NewForbidden word it.
        scope = "at the cluster scope" if namespace is None else f'in the namespace "{namespace}"'
        message = (
            f'User "{FORBIDDEN_USER}" cannot {verb} resource "{resource}" in API group '
            f'"{group}" {scope}'
        )
        plural = resource.split("/")[0]
        qualified = f"{plural}.{group}" if group else plural
        details = {"name": name, "group": group, "kind": plural} if group else {"kind": plural}
        if name and not group:
            details = {"name": name, "kind": plural}
        subject = f'{qualified} "{name}"' if name else qualified
        return status(403, "Forbidden", f"{subject} is forbidden: {message}", details)

    def read_node(self, name: str) -> tuple[int, Event]:
        with self._lock:
            found = self._nodes.get(name)
            if found is None:
                return 404, _not_found("nodes", "", name)
            return 200, self.on_the_wire(_copy(found))

    def throttle_patches(self, count: int, retry_after: int = 1) -> None:
        """Answer the next `count` node status patches 429 Too Many Requests, with a
        Retry-After of `retry_after` seconds, as priority and fairness does when busy."""
        with self._lock:
            self._throttled_patches = count
            self._retry_after = retry_after

    def throttled(self) -> int | None:
        """The Retry-After for this patch, when it is to be refused with a 429."""
        with self._lock:
            if self._throttled_patches <= 0:
                return None
            self._throttled_patches -= 1
            return self._retry_after

    def on_the_wire(self, obj: Event) -> Event:
        """A node as the API sends it: with `node_padding` as its `status.images`."""
        if self.node_padding is None or obj.get("kind", "Node") != "Node":
            return obj
        status_map = obj.get("status")
        if isinstance(status_map, dict):
            obj = {**obj, "status": {**status_map, "images": self.node_padding}}
        return obj

    def patch_node_status(
        self, name: str, content_type: str | None, body: Any
    ) -> tuple[int, Event]:
        """A JSON patch of `nodes/{name}/status`: only what it does to `status` is kept, as the
        status subresource ignores the rest."""
        if content_type != JSON_PATCH:
            return 415, _unsupported(JSON_PATCH)
        try:
            patch = jsonpatch.JsonPatch(body)
        except (jsonpatch.InvalidJsonPatch, TypeError) as error:
            return 400, status(400, "BadRequest", str(error))
        with self._lock:
            current = self._nodes.get(name)
            if current is None:
                return 404, _not_found("nodes", "", name)
            try:
                patched = patch.apply(_copy(current), in_place=True)
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
                message = "the server rejected our request due to an error in our request"
                return 422, status(422, "Invalid", message, {})
            if patched["status"] == current["status"]:
                return 200, self.on_the_wire(current)
            # Stored objects are never changed once stored (see _emit): parts are shared.
            metadata = dict(current["metadata"])
            stored = {**current, "metadata": metadata, "status": patched["status"]}
            self._nodes[name] = stored
            return 200, self.on_the_wire(self._emit("MODIFIED", stored)["object"])

    def lease_request(
        self, method: str, namespace: str, name: str | None, body: Any
    ) -> tuple[int, Event]:
        with self._lock:
            if name is None and method == "POST":
                problem = _unusable_object(body, namespace)
                if problem is not None:
                    return problem
                key = (namespace, body["metadata"]["name"])
                if key in self._leases:
                    message = f'leases.{COORDINATION_GROUP} "{key[1]}" already exists'
                    details = {"name": key[1], "group": COORDINATION_GROUP, "kind": "leases"}
                    return 409, status(409, "AlreadyExists", message, details)
                return 201, self._store_lease(key, body)
            if name is None:
                return _method_not_allowed()
            current = self._leases.get((namespace, name))
            if current is None:
                return 404, _not_found("leases", COORDINATION_GROUP, name)
            if method == "GET":
                return 200, _copy(current)
            if method != "PUT":
                return _method_not_allowed()
            version = (body.get("metadata") or {}).get("resourceVersion")
            if version != current["metadata"]["resourceVersion"]:
                message = (
                    f'Operation cannot be fulfilled on leases.{COORDINATION_GROUP} "{name}": the '
                    "object has been modified; please apply your changes to the latest version "
                    "and try again"
                )
                details = {"name": name, "group": COORDINATION_GROUP, "kind": "leases"}
                return 409, status(409, "Conflict", message, details)
            return 200, self._store_lease((namespace, name), body)

    def _store_lease(self, key: tuple[str, str], body: Event) -> Event:
        stored = self._store(self._leases, key, body, key[0])
        stored.pop("type", None)
        self._leases[key].pop("type", None)
        return stored

    def create_event(self, namespace: str, body: Any) -> tuple[int, Event]:
        problem = _unusable_object(body, namespace)
        if problem is not None:
            return problem
        involved = body.get("involvedObject") or {}
        if not involved.get("namespace") and namespace not in ("default", ""):
            # pkg/apis/core/validation/events.go: an event about a cluster-scoped object.
            message = (
                f'Event "{body["metadata"]["name"]}" is invalid: involvedObject.namespace: '
                f'Invalid value: "": does not match event.namespace'
            )
            return 422, status(422, "Invalid", message, {"kind": "Event"})
        with self._lock:
            event = _copy(body)
            event["metadata"]["namespace"] = namespace
            self._events.append(event)
            return 201, _copy(event)

    def claim_template_request(
        self,
        method: str,
        namespace: str | None,
        name: str | None,
        query: Mapping[str, str],
        content_type: str | None,
        body: Any,
    ) -> tuple[int, Event]:
        """ResourceClaimTemplates: create (201, or 409 AlreadyExists), a merge PATCH of one,
        a list across namespaces or in one (`labelSelector` key=value), and a DELETE whose
        `preconditions.resourceVersion` must be the stored one (409 Conflict)."""
        resource = "resourceclaimtemplates"
        with self._lock:
            if method == "POST" and namespace and name is None:
                problem = _unusable_object(body, namespace)
                if problem is not None:
                    return problem
                key = (namespace, body["metadata"]["name"])
                body = _stored_template(body, self.consumable_capacity)
                if key in self._claim_templates:
                    message = f'{resource}.{RESOURCE_GROUP} "{key[1]}" already exists'
                    return 409, status(409, "AlreadyExists", message, {"name": key[1]})
                return 201, self._store(self._claim_templates, key, body, namespace, typed=False)
            if method == "GET" and name is None:
                return 200, self._claim_template_list(namespace, query.get("labelSelector", ""))
            current = self._claim_templates.get((namespace or "", name or ""))
            if namespace is None or name is None or method not in ("GET", "PATCH", "DELETE"):
                return _method_not_allowed()
            if current is None:
                return 404, _not_found(resource, RESOURCE_GROUP, name)
            if method == "GET":
                return 200, _copy(current)
            if method == "PATCH":
                if content_type != MERGE_PATCH or not isinstance(body, dict):
                    return 415, status(415, "UnsupportedMediaType", f"want {MERGE_PATCH}")
                patched = _merge(_copy(current), body)
                return 200, self._store(
                    self._claim_templates, (namespace, name), patched, namespace, typed=False
                )
            wanted = ((body or {}).get("preconditions") or {}).get("resourceVersion")
            if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
                message = (
                    f'Operation cannot be fulfilled on {resource}.{RESOURCE_GROUP} "{name}": '
                    "the ResourceVersion in the precondition does not match"
                )
                return 409, status(409, "Conflict", message, {"name": name})
            del self._claim_templates[(namespace, name)]
            self._version += 1
            return 200, status(200, "", "")

    def _claim_template_list(self, namespace: str | None, selector: str) -> Event:
        key, _, value = selector.partition("=")
        items = []
        for (where, _name), obj in sorted(self._claim_templates.items()):
            labels = obj["metadata"].get("labels") or {}
            if namespace not in (None, where) or (key and labels.get(key) != value):
                continue
            item = _copy(obj)
            del item["kind"], item["apiVersion"]
            items.append(item)
        return {
            "kind": "ResourceClaimTemplateList",
            "apiVersion": f"{RESOURCE_GROUP}/v1",
            "metadata": {"resourceVersion": str(self._version)},
            "items": items,
        }

    def read_secret(self, namespace: str, name: str) -> tuple[int, Event]:
        with self._lock:
            found = self._secrets.get((namespace, name))
            if found is None:
                return 404, _not_found("secrets", "", name)
            return 200, _copy(found)

    def create_secret(self, namespace: str, body: Any) -> tuple[int, Event]:
        problem = _unusable_object(body, namespace)
        if problem is not None:
            return problem
        name = body["metadata"]["name"]
        with self._lock:
            if (namespace, name) in self._secrets:
                message = f'secrets "{name}" already exists'
                details = {"name": name, "kind": "secrets"}
                return 409, status(409, "AlreadyExists", message, details)
            return 201, self._store(self._secrets, (namespace, name), body, namespace)

    def replace_secret(self, namespace: str, name: str, body: Any) -> tuple[int, Event]:
        problem = _unusable_object(body, namespace)
        if problem is not None:
            return problem
        if body["metadata"]["name"] != name:
            message = (
                f"the name of the object ({body['metadata']['name']}) does not match the name "
                f"on the URL ({name})"
            )
            return 400, status(400, "BadRequest", message)
        with self._lock:
            current = self._secrets.get((namespace, name))
            if current is None:
                return 404, _not_found("secrets", "", name)
            version = body["metadata"].get("resourceVersion")
            if version and version != current["metadata"]["resourceVersion"]:
                message = (
                    f'Operation cannot be fulfilled on secrets "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again"
                )
                return 409, status(409, "Conflict", message, {"name": name, "kind": "secrets"})
            if body.get("type", "Opaque") != current.get("type", "Opaque"):
                message = (
                    f'Secret "{name}" is invalid: type: Invalid value: "{body.get("type")}": '
                    "field is immutable"
                )
                return 422, status(422, "Invalid", message, {"name": name, "kind": "Secret"})
            return 200, self._store(self._secrets, (namespace, name), body, namespace)

    def read_webhook_configuration(self, kind: str, name: str) -> tuple[int, Event]:
        with self._lock:
            found = self._webhook_configurations.get((kind, name))
            if found is None:
                return 404, _not_found(f"{kind}webhookconfigurations", ADMISSION_GROUP, name)
            return 200, _copy(found)

    def patch_webhook_configuration(
        self, kind: str, name: str, content_type: str | None, body: Any
    ) -> tuple[int, Event]:
        if content_type != JSON_PATCH:
            message = (
                "the body of the request was in an unknown format - accepted media types "
                f"include: {JSON_PATCH}"
            )
            return 415, status(415, "UnsupportedMediaType", message)
        try:
            patch = jsonpatch.JsonPatch(body)
        except (jsonpatch.InvalidJsonPatch, TypeError) as error:
            return 400, status(400, "BadRequest", str(error))
        with self._lock:
            current = self._webhook_configurations.get((kind, name))
            if current is None:
                return 404, _not_found(f"{kind}webhookconfigurations", ADMISSION_GROUP, name)
            try:
                patched = patch.apply(_copy(current))
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
                # What the apiserver answers when a patch does not apply, a failed test included.
                message = "the server rejected our request due to an error in our request"
                return 422, status(422, "Invalid", message, {})
            key = (kind, name)
            return 200, self._store(self._webhook_configurations, key, patched, None)

    def _store(
        self,
        objects: dict[tuple[str, str], Event],
        key: tuple[str, str],
        body: Event,
        namespace: str | None,
        *,
        typed: bool = True,
    ) -> Event:
        """Keep `body` under `key` with the metadata the apiserver owns; a body equal to the
        stored object changes nothing, not even the resourceVersion. `typed`: a Secret, which
        gets its default type."""
        body = _copy(body)
        metadata = body.setdefault("metadata", {})
        metadata.pop("managedFields", None)
        if namespace is not None:
            metadata["namespace"] = namespace
            if typed:
                body.setdefault("type", "Opaque")
        current = objects.get(key)
        if current is not None:
            for field in ("uid", "creationTimestamp", "resourceVersion"):
                metadata[field] = current["metadata"][field]
            if body == current:
                return _copy(current)
        else:
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._version += 1
        metadata["resourceVersion"] = str(self._version)
        objects[key] = body
        return _copy(body)

    # --- namespaces (handler threads) ----------------------------------------------------

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def add_workload(self, path: str, obj: Mapping[str, Any]) -> None:
        """A Pod or workload for the list at `path` (one served), stored as given."""
        with self._lock:
            self._workloads[path].append(json.loads(json.dumps(dict(obj))))

    def serve_at(self, path: str, moved_to: str | None, *, also: bool = False) -> None:
        """Serve the list at `path` at `moved_to` instead (another version of its group), or
        beside it (`also`: the first version served stays the group's preferred one), or not
        at all: its discovery and its list follow."""
        with self._lock:
            _, kind = self._served[path] if also else self._served.pop(path)
            if moved_to is not None:
                group_version = moved_to.removeprefix("/apis/").removeprefix("/api/")
                self._served[moved_to] = (group_version.rsplit("/", 1)[0], kind)
                self._workloads.setdefault(moved_to, [])

    def serves(self, path: str) -> bool:
        with self._lock:
            return path in self._served

    def discovery(self, path: str) -> Event | None:
        """The discovery document at `path`, built from the lists served; None for no such."""
        with self._lock:
            served = dict(self._served)
        by_version: dict[str, list[Event]] = {}
        for list_path, (api_version, list_kind) in served.items():
            resource = {
                "name": list_path.rsplit("/", 1)[1],
                "singularName": "",
                "namespaced": True,
                "kind": list_kind.removesuffix("List"),
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            }
            # A subresource carries its parent's kind, and lists nothing.
            status = {**resource, "name": f"{resource['name']}/status"}
            status["verbs"] = ["get", "patch", "update"]
            by_version.setdefault(api_version, []).extend([status, resource])
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"]}
        if path == "/apis":
            groups: dict[str, list[str]] = {}
            for api_version in by_version:
                if "/" in api_version:
                    group, version = api_version.split("/")
                    groups.setdefault(group, []).append(version)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": group,
                        "versions": [
                            {"groupVersion": f"{group}/{v}", "version": v} for v in versions
                        ],
                        "preferredVersion": {
                            "groupVersion": f"{group}/{versions[0]}",
                            "version": versions[0],
                        },
                    }
                    for group, versions in groups.items()
                ],
            }
        api_version = path.removeprefix("/apis/").removeprefix("/api/")
        if api_version not in by_version:
            return None
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": api_version,
            "resources": by_version[api_version],
        }

    def workload_page(self, path: str, query: Mapping[str, str]) -> tuple[int, Event | bytes]:
        """A page of a workload list, as the apiserver pages a LIST: `limit` items at most, and
        `metadata.continue` (opaque) with `remainingItemCount` while more are left. Later pages
        come from the snapshot the first one began, whatever was written since, until
        `expire_list_snapshots()` (etcd's compaction): then the token is 410 `Expired`."""
        with self._lock:
            api_version, kind = self._served[path]
            return self._page(path, kind, api_version, self._workloads[path], query)

    def object_page(self, collection: str, query: Mapping[str, str]) -> tuple[int, Event | bytes]:
        """A page of the namespaces or the nodes, as `workload_page` pages."""
        with self._lock:
            # A page after the first reads its snapshot: the current list is not copied for it.
            stored = [] if query.get("continue") else list(self._watched[collection].values())
            path = f"/api/v1/{collection}"
            return self._page(path, LIST_KINDS[collection], "v1", stored, query)

    def expire_list_snapshots(self) -> None:
        """Compaction: every `continue` token handed out so far is 410 Expired from now."""
        with self._lock:
            self._snapshots.clear()

    def _page(
        self,
        path: str,
        kind: str,
        api_version: str,
        stored: list[Event],
        query: Mapping[str, str],
    ) -> tuple[int, Event | bytes]:
        # Stored objects are replaced on a write, never changed: a snapshot is a list of them.
        version, start, number = str(self._version), 0, -1
        token = query.get("continue", "")
        if token:
            token_path, version, offset, number_text = [*token.split("|"), "", "", "", ""][:4]
            found = self._snapshots.get(int(number_text)) if number_text.isdigit() else None
            if token_path != path or found is None or not offset.isdigit():
                message = (
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
                return 410, status(410, "Expired", message)
            stored, start, number = found, int(offset), int(number_text)
        limit = int(query.get("limit", "0") or "0")
        end = len(stored) if limit <= 0 else min(len(stored), start + limit)
        metadata: Event = {"resourceVersion": version}
        if end < len(stored):
            if number < 0:
                self._snapshot_numbers += 1
                number = self._snapshot_numbers
                self._snapshots[number] = (
                    stored if stored is not self._workloads.get(path) else list(stored)
                )
                while len(self._snapshots) > MAX_SNAPSHOTS:
                    del self._snapshots[min(self._snapshots)]
            metadata["continue"] = f"{path}|{version}|{end}|{number}"
            metadata["remainingItemCount"] = len(stored) - end
        elif number >= 0:
            self._snapshots.pop(number, None)
        head = {"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": []}
        items = b",".join(self._list_item(obj) for obj in stored[start:end])
        encoded = json.dumps(head, separators=(",", ":")).encode()
        return 200, encoded[:-2] + items + b"]}"

    def _list_item(self, obj: Event) -> bytes:
        """`obj` as a list carries it (without kind and apiVersion), encoded once per stored
        version of it: a list of 100,000 nodes is then mostly a join."""
        key = id(obj)
        cached = self._encoded.get(key)
        padded = self.node_padding is not None
        if cached is None or cached[0] is not obj or (PADDING_MARK_JSON in cached[1]) != padded:
            item = {name: value for name, value in obj.items() if name not in LIST_DROPS}
            if self.node_padding is not None and isinstance(item.get("status"), dict):
                item["status"] = {**item["status"], "images": PADDING_MARK}
            encoded = json.dumps(item, separators=(",", ":")).encode()
            if len(self._encoded) > MAX_ENCODED:
                self._encoded.clear()
            cached = self._encoded[key] = (obj, encoded)
        if self.node_padding is None:
            return cached[1]
        if self._padding is None or self._padding[0] is not self.node_padding:
            padding = json.dumps(self.node_padding, separators=(",", ":")).encode()
            self._padding = (self.node_padding, padding)
        return cached[1].replace(PADDING_MARK_JSON, self._padding[1])

    def namespace(self, name: str) -> Event | None:
        with self._lock:
            found = self._namespaces.get(name)
            answer = json.loads(json.dumps(found)) if found is not None else None
        self._reads_released.wait()
        return answer

    def subscribe(
        self, collection: str, since: str
    ) -> tuple[list[Event], queue.Queue[Event | None] | None]:
        """The events a watch from `since` starts with, and the queue of later ones (None when
        the watch ends after its first events)."""
        with self._lock:
            if since in ("", "0"):
                first = [
                    {"type": "ADDED", "object": json.loads(json.dumps(namespace))}
                    for namespace in self._watched[collection].values()
                ]
            else:
                version = int(since)
                if version < self._oldest_watchable:
                    message = f"too old resource version: {version} ({self._oldest_watchable})"
                    return [{"type": "ERROR", "object": status(410, "Expired", message)}], None
                first = [
                    event
                    for at, kind, event in self._history
                    if at > version and kind == collection
                ]
            later: queue.Queue[Event | None] = queue.Queue()
            self._watchers[later] = collection
            return first, later

    def unsubscribe(self, watcher: queue.Queue[Event | None]) -> None:
        with self._lock:
            self._watchers.pop(watcher, None)

    def bookmark(self, collection: str) -> Event:
        with self._lock:
            return {
                "type": "BOOKMARK",
                "object": {
                    "kind": LIST_KINDS[collection].removesuffix("List"),
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self._version)},
                },
            }

    def _emit(self, kind: str, obj: Event) -> Event:
        """Record and deliver a change of `obj`, which was just stored: a stored object is
        replaced on the next change, never changed in place, so the event holds it as it is
        (and list snapshots hold it too)."""
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        event = {"type": kind, "object": obj}
        collection = COLLECTIONS[obj["kind"]]
        self._history.append((self._version, collection, event))
        if self.history_limit is not None and len(self._history) > self.history_limit:
            self._oldest_watchable = self._history.popleft()[0]
        if self._held_events is not None:
            self._held_events.append((collection, event))
        else:
            self._deliver(collection, event)
        return event

    def _deliver(self, collection: str, event: Event) -> None:
        for watcher, watched in self._watchers.items():
            if watched == collection:
                watcher.put(event)


def _copy(obj: T) -> T:
    return copy.deepcopy(obj)


def _not_found(resource: str, group: str, name: str) -> Event:
    qualified = f"{resource}.{group}" if group else resource
    details = {"name": name, "kind": resource} | ({"group": group} if group else {})
    return status(404, "NotFound", f'{qualified} "{name}" not found', details)


def _unsupported(media_type: str) -> Event:
    message = (
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{media_type}"
    )
    return status(415, "UnsupportedMediaType", message)


def _method_not_allowed() -> tuple[int, Event]:
    message = "the server does not allow this method on the requested resource"
    return 405, status(405, "MethodNotAllowed", message, {})


def _unusable_object(body: Any, namespace: str) -> tuple[int, Event] | None:
    """The 400 or 422 the apiserver answers for a body that is no object for this namespace."""
    if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
        return 400, status(400, "BadRequest", "the request body is not an object")
    metadata = body["metadata"]
    if not metadata.get("name"):
        message = "metadata.name: Required value: name or generateName is required"
        return 422, status(422, "Invalid", message)
    if metadata.get("namespace", namespace) != namespace:
        message = (
            "the namespace of the provided object does not match the namespace sent on the request"
        )
        return 400, status(400, "BadRequest", message)
    return None


def _stored_template(body: Event, consumable_capacity: bool) -> Event:
    """A ResourceClaimTemplate as the apiserver stores it: each device request defaulted
    (allocationMode ExactCount, count 1), quantities in canonical form (16384Mi is 16Gi), and
    capacity requests dropped while DRAConsumableCapacity is off."""
    stored = _copy(body)
    devices = ((stored.get("spec") or {}).get("spec") or {}).get("devices") or {}
    for request in devices.get("requests") or []:
        for device in [request.get("exactly"), *(request.get("firstAvailable") or [])]:
            if not isinstance(device, dict):
                continue
            device.setdefault("allocationMode", "ExactCount")
            if device["allocationMode"] == "ExactCount":
                device.setdefault("count", 1)
            if not consumable_capacity:
                device.pop("capacity", None)
            amounts = (device.get("capacity") or {}).get("requests") or {}
            for name, amount in amounts.items():
                amounts[name] = _canonical_quantity(amount)
    return stored


def _canonical_quantity(amount: Any) -> Any:
    """Mi amounts as the apiserver writes them back: the largest binary suffix that keeps an
    integer (the only form the webhook writes)."""
    text = str(amount)
    if not text.endswith("Mi") or not text[:-2].isdigit():
        return amount
    value, suffix = int(text[:-2]), "Mi"
    for larger in ("Gi", "Ti"):
        if value % 1024:
            break
        value, suffix = value // 1024, larger
    return f"{value}{suffix}"


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: null removes a member, objects merge, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge(merged.get(key), value)
    return merged


def _namespace_labels(name: str, labels: Mapping[str, str]) -> dict[str, str]:
    # The API sets this label on every namespace; Go encodes map keys sorted.
    return dict(sorted({**labels, NAME_LABEL: name}.items()))


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], api: FakeApiServer) -> None:
        self.api = api
        self.closed = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client or a test that cut the connection is no error here."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as Go's net/http sets it: the headers and the body go out as two writes, and
    # Nagle's algorithm would hold the body until the client's delayed ACK, 40 ms a request.
    disable_nagle_algorithm = True
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `FakeApiServer.requests()` instead."""

    def do_GET(self) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        content_type, body = self._read_body()
        authorization = self.headers.get("Authorization") or ""
        token = (
            authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else None
        )
        api.record(RecordedRequest(self.command, url.path, query, content_type, body, token))
        if api.token is not None and not api.knows(token):
            self._send_json(401, status(401, "Unauthorized", "Unauthorized"))
            return
        secrets = SECRETS_PATH.match(url.path)
        webhooks = WEBHOOKS_PATH.match(url.path)
        denied = api.denial(self.command, url.path, query)
        if denied is not None:
            self._send_json(403, denied)
            return
        if self._serve_node_side(url.path, query, content_type, body):
            return
        templates = CLAIM_TEMPLATES_PATH.match(url.path)
        if templates and api.claim_templates_served:
            api.run_hooks(self.command, url.path)
            self._send_json(
                *api.claim_template_request(
                    self.command, templates[1], templates[2], query, content_type, body
                )
            )
            return
        if secrets or webhooks:
            api.run_hooks(self.command, url.path)
            if secrets:
                self._send_json(*self._secrets(secrets[1], secrets[2], content_type, body))
            else:
                assert webhooks is not None
                self._send_json(*self._webhooks(webhooks[1], webhooks[2], content_type, body))
            return
        if self.command != "GET":
            self._send_json(*_method_not_allowed())
            return
        watching = query.get("watch", "false")
        if watching not in TRUE_WORDS | FALSE_WORDS:
            self._send_json(400, status(400, "BadRequest", f"invalid watch: {watching!r}"))
            return
        if api.serves(url.path) and watching in FALSE_WORDS:
            self._send_json(*api.workload_page(url.path, query))
            return
        found_discovery = api.discovery(url.path)
        if found_discovery is not None:
            self._send_json(200, found_discovery)
            return
        if url.path == NAMESPACES_PATH:
            if watching in TRUE_WORDS:
                self._serve_watch(query)
            else:
                self._send_json(*api.object_page("namespaces", query))
            return
        name = url.path.removeprefix(NAMESPACES_PATH + "/")
        if url.path.startswith(NAMESPACES_PATH + "/") and name and "/" not in name:
            found = api.namespace(name)
            if self.server.closed.is_set():
                return
            if found is None:
                self._send_json(404, _not_found("namespaces", "", name))
            else:
                self._send_json(200, found)
            return
        missing = "the server could not find the requested resource"
        self._send_json(404, status(404, "NotFound", missing, {}))

    # Namespaces are only read; anything else is recorded, so a test sees it, and refused.
    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _serve_node_side(
        self, path: str, query: Mapping[str, str], content_type: str | None, body: Any
    ) -> bool:
        """Nodes, their status, Leases and Events: what the VRAM advertiser calls."""
        api = self.server.api
        node = NODE_PATH.match(path)
        leases = LEASES_PATH.match(path)
        events = EVENTS_PATH.match(path)
        if path == NODES_PATH and self.command == "GET":
            if query.get("watch", "false") in TRUE_WORDS:
                self._serve_watch(query, "nodes")
            else:
                api.run_hooks(self.command, path)
                self._send_json(*api.object_page("nodes", query))
        elif node and node[2] and self.command == "PATCH":
            if api.write_latency:
                time.sleep(api.write_latency)  # etcd's write, outside every lock
            retry_after = api.throttled()
            if retry_after is not None:
                message = "Too many requests, please try again later."
                self._send_json(
                    429, status(429, "TooManyRequests", message), {"Retry-After": str(retry_after)}
                )
            else:
                self._send_json(*api.patch_node_status(node[1], content_type, body))
        elif node and not node[2] and self.command == "GET":
            self._send_json(*api.read_node(node[1]))
        elif leases:
            self._send_json(*api.lease_request(self.command, leases[1], leases[2], body))
        elif events and self.command == "POST":
            self._send_json(*api.create_event(events[1], body))
        elif node or leases or events or path == NODES_PATH:
            self._send_json(*_method_not_allowed())
        else:
            return False
        return True

    def _read_body(self) -> tuple[str | None, Any]:
        """The media type (without parameters) and the body: decoded JSON, else text."""
        header = self.headers.get("Content-Type")
        content_type = header.split(";")[0].strip().lower() if header else None
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return content_type, None
        data = self.rfile.read(length)
        try:
            return content_type, json.loads(data)
        except ValueError:
            return content_type, data.decode(errors="replace")

    def _secrets(
        self, namespace: str, name: str | None, content_type: str | None, body: Any
    ) -> tuple[int, Event]:
        api = self.server.api
        # Without a Content-Type the apiserver reads JSON, its first media type.
        if self.command in ("POST", "PUT") and content_type not in (None, JSON):
            message = (
                "the body of the request was in an unknown format - accepted media types "
                f"include: {JSON}"
            )
            return 415, status(415, "UnsupportedMediaType", message)
        if name is None and self.command == "POST":
            return api.create_secret(namespace, body)
        if name is not None and self.command == "GET":
            return api.read_secret(namespace, name)
        if name is not None and self.command == "PUT":
            return api.replace_secret(namespace, name, body)
        return _method_not_allowed()

    def _webhooks(
        self, kind: str, name: str, content_type: str | None, body: Any
    ) -> tuple[int, Event]:
        api = self.server.api
        if self.command == "GET":
            return api.read_webhook_configuration(kind, name)
        if self.command == "PATCH":
            return api.patch_webhook_configuration(kind, name, content_type, body)
        return _method_not_allowed()

    def _serve_watch(self, query: Mapping[str, str], collection: str = "namespaces") -> None:
        api = self.server.api
        try:
            first, later = api.subscribe(collection, query.get("resourceVersion", ""))
        except ValueError:
            version = query.get("resourceVersion")
            self._send_json(400, status(400, "BadRequest", f"invalid resource version {version}"))
            return
        timeout = query.get("timeoutSeconds")
        deadline = time.monotonic() + int(timeout) if timeout else None
        bookmarks = query.get("allowWatchBookmarks", "false") in TRUE_WORDS
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in first:
                self._send_chunk(event)
            while later is not None and not self.server.closed.is_set():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    if bookmarks:
                        self._send_chunk(api.bookmark(collection))
                    break
                try:
                    later_event = later.get(timeout=min(0.05, left) if left is not None else 0.05)
                except queue.Empty:
                    if self._client_gone():
                        return
                    continue
                if later_event is None:
                    break
                self._send_chunk(later_event)
            if not self.server.closed.is_set():
                self.wfile.write(b"0\r\n\r\n")
        finally:
            if later is not None:
                api.unsubscribe(later)

    def _client_gone(self) -> bool:
        """The apiserver ends a watch whose client hung up; a silent watch must look."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _send_chunk(self, event: Event) -> None:
        if isinstance(event.get("object"), dict):
            event = {**event, "object": self.server.api.on_the_wire(event["object"])}
        line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")

    def _send_json(
        self, code: int, body: Event | bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
