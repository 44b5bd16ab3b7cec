"""`gpu-admission scan`: what the current policies would do to every Pod and workload of a
live cluster, read-only.

It asks the cluster's discovery in which version each kind the webhook judges is served (a
v1.20 cluster serves CronJobs in batch/v1beta1; one may serve none), lists each across
namespaces, page by page (`limit` and `continue`, as kubectl does), and the namespaces for their
labels, then answers each object as a dry-run CREATE offline, as `review` does. An object is
`denied` (with the message), `would-deny` (a Warn or Audit policy lets it through today),
`rewritten` (the change in one line) or `untouched`. A kind the cluster does not serve, or
refuses to list, is named on stderr with the reason, and the others are scanned. Exit codes
as `review`'s (1: something denied; with `strict`, also a would-deny), and 2 when a kind
could not be listed: the scan is incomplete.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from webhook.admission.decide import ENFORCEMENT, WOULD_DENY
from webhook.cli.admit import admit, review_body
from webhook.cli.errors import InputError
from webhook.cli.manifests import creation_review, read_manifest
from webhook.cli.policies import load_policy_set
from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS
from webhook.policy.namespace_labels import StaticNamespaceLabels
from webhook.policy.policy_set import PolicySet

PAGE_SIZE = 500
# The kinds the webhook judges: (API group, kind).
SCANNED_KINDS = tuple(POD_TEMPLATE_LOCATIONS)
NAMESPACES = "/api/v1/namespaces"

Result = Literal["denied", "would-deny", "rewritten", "untouched"]
# What to do about an answer that is no list, by its HTTP status.
_HINTS = {
    401: "; the credentials were refused: check the kubeconfig's user or token",
    403: "; the scan may only list what deploy/scan's ClusterRole gpu-admission-scan grants: "
    "bind it to whoever runs the scan",
    410: "; the list changed while it was read page by page: run the scan again",
}
# GET of a path with its query, answering the decoded JSON body.
Get = Callable[[str, Mapping[str, str]], Any]


class ErrorAnswer(InputError):
    """A GET that the API answered with an error: `status` is its HTTP status."""

    def __init__(self, line: str, status: int) -> None:
        super().__init__(line)
        self.status = status


@dataclass(frozen=True)
class ScanOptions:
    policies: Path
    mode: str = "auto"
    output: Literal["table", "json"] = "table"
    page_size: int = PAGE_SIZE
    # A would-deny under a Warn or Audit policy counts as denied.
    strict: bool = False


@dataclass(frozen=True)
class Collection:
    """Where the cluster lists a kind across namespaces."""

    path: str
    api_version: str
    kind: str


@dataclass(frozen=True)
class Finding:
    kind: str
    namespace: str
    name: str
    result: Result
    policy: str
    detail: str


def run_scan(options: ScanOptions, *, stdout: TextIO, stderr: TextIO) -> int:
    policies = load_policy_set(options.policies, used_by="scan")
    get = _cluster_get(options.mode)
    labels = {}
    for item in list_all(get, NAMESPACES, options.page_size):
        metadata = item.get("metadata") or {}
        labels[metadata.get("name", "")] = metadata.get("labels") or {}
    source = StaticNamespaceLabels(labels, reason="the namespace was not listed")
    collections, unserved, unanswered = served_collections(get)
    refused = [f"{kind} not scanned: {why}" for kind, why in unanswered.items()]
    findings: list[Finding] = []
    for collection in collections:
        try:
            items = list(list_all(get, collection.path, options.page_size))
        except InputError as error:
            refused.append(f"{collection.kind} not scanned: {'; '.join(error.lines)}")
            continue
        findings += [
            _judge(item, collection.api_version, collection.kind, policies, source)
            for item in items
        ]
    if options.output == "json":
        stdout.write(json.dumps([asdict(finding) for finding in findings], indent=2) + "\n")
    else:
        stdout.write(_table(findings))
    for kind in unserved:
        stderr.write(f"{kind} not scanned: the cluster does not serve it\n")
    for line in refused:
        stderr.write(line + "\n")
    counts = {result: sum(f.result == result for f in findings) for result in _RESULTS}
    stderr.write(
        f"{len(findings)} objects: {counts['denied']} would be denied, {counts['would-deny']} "
        f"let through by Warn or Audit that Enforce would deny, {counts['rewritten']} rewritten\n"
    )
    if refused:
        return 2  # incomplete: what was not listed may hold denials too
    return 1 if counts["denied"] or (options.strict and counts["would-deny"]) else 0


_RESULTS: tuple[Result, ...] = ("denied", "would-deny", "rewritten", "untouched")


def served_collections(get: Get) -> tuple[list[Collection], list[str], dict[str, str]]:
    """Each kind the webhook judges, in the version of its group the cluster serves it in (the
    group's preferred version first); the kinds it serves in none; and, for the kinds whose
    discovery did not answer, why, by kind."""
    core = get("/api", {})
    groups = {group.get("name", ""): group for group in get("/apis", {}).get("groups") or []}
    resources = _Resources(get)
    served: list[Collection] = []
    unserved: list[str] = []
    refused: dict[str, str] = {}
    for group, kind in SCANNED_KINDS:
        if group:
            found = groups.get(group) or {}
            preferred = (found.get("preferredVersion") or {}).get("groupVersion")
            versions = [v.get("groupVersion", "") for v in found.get("versions") or []]
            candidates = sorted(versions, key=lambda version: version != preferred)
        else:
            candidates = list(core.get("versions") or [])
        try:
            collection = resources.listed_in(candidates, kind)
        except InputError as error:
            refused[kind] = "; ".join(error.lines)
            continue
        if collection is None:
            unserved.append(kind)
        else:
            served.append(collection)
    return served, unserved, refused


class _Resources:
    """The resources of each group version, asked once."""

    def __init__(self, get: Get) -> None:
        self._get = get
        self._read: dict[str, list[Any]] = {}

    def listed_in(self, group_versions: list[str], kind: str) -> Collection | None:
        """Where the first of `group_versions` that lists `kind` lists it (a subresource such
        as pods/status has the kind too, and is not it)."""
        for group_version in group_versions:
            prefix = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
            if prefix not in self._read:
                self._read[prefix] = self._get(prefix, {}).get("resources") or []
            for resource in self._read[prefix]:
                name = resource.get("name", "")
                verbs = resource.get("verbs") or []
                if resource.get("kind") == kind and "/" not in name and "list" in verbs:
                    return Collection(f"{prefix}/{name}", group_version, kind)
        return None


def list_all(
    get: Get, path: str, page_size: int = PAGE_SIZE, *, label_selector: str = ""
) -> Iterator[dict[str, Any]]:
    """Every item of a collection (with `label_selector`, those it selects), page by page."""
    token = ""
    while True:
        query = {"limit": str(page_size)}
        if label_selector:
            query["labelSelector"] = label_selector
        if token:
            query["continue"] = token
        page = get(path, query)
        token = (page.get("metadata") or {}).get("continue") or ""
        items = list(reversed(page.get("items") or []))
        # Each item is let go once yielded, and the page before the next one is read: a caller
        # that keeps little of each item holds at most one page.
        del page
        while items:
            item = items.pop()
            if isinstance(item, dict):
                yield item
        if not token:
            return


def _judge(
    item: dict[str, Any], api_version: str, kind: str, policies: PolicySet, labels: Any
) -> Finding:
    # The list encodes its items without apiVersion and kind.
    obj = {"apiVersion": api_version, "kind": kind, **item}
    obj.pop("status", None)
    manifest = read_manifest(obj)
    review = creation_review(manifest, manifest.namespace)
    verdict = admit(review_body(review), policies, "mutate", labels).verdict
    audit = verdict.audit_annotations
    policy = audit.get("policy", "")
    where = (kind, manifest.namespace, manifest.name)
    if not verdict.allowed:
        return Finding(*where, "denied", policy, verdict.message)
    if WOULD_DENY in audit:
        allowed_by = f"(allowed today: {audit.get(ENFORCEMENT, '')}) "
        return Finding(*where, "would-deny", policy, allowed_by + audit[WOULD_DENY])
    if verdict.patch:
        detail = audit.get("rewritten") or f"{len(verdict.patch)} patch operations"
        governing = next((p for p in policies.policies if p.name == policy), None)
        sharing = governing.sharing if governing is not None else None
        if sharing is not None and not sharing.enforced and audit.get("rewritten"):
            detail += "; not enforced (hardLimit: None): only the frameworks told it keep the share"
        return Finding(*where, "rewritten", policy, detail)
    return Finding(*where, "untouched", policy, "")


def _table(findings: list[Finding]) -> str:
    rows = [("KIND", "NAMESPACE/NAME", "RESULT", "POLICY", "DETAIL")]
    rows += [
        (f.kind, f"{f.namespace}/{f.name}", f.result, f.policy or "-", f.detail) for f in findings
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = [
        "  ".join([*(row[i].ljust(widths[i]) for i in range(4)), row[4]]).rstrip() for row in rows
    ]
    return "\n".join(lines) + "\n"


def _cluster_get(mode: str) -> Get:
    return api_get(cluster_client(mode, "scan"), _HINTS)


def cluster_client(mode: str, purpose: str) -> Any:
    """A client of the API `mode` selects (see NAMESPACE_LABELS), or InputError saying why there
    is none: "no cluster to `purpose`"."""
    # Imported here: importing it loads the Kubernetes client.
    from webhook.kube.client_config import api_client
    from webhook.policy.namespace_labels import NoCluster

    client = api_client(mode)
    if isinstance(client, NoCluster):
        raise InputError(f"no cluster to {purpose}: {client.reason}")
    return client


def api_get(client: Any, hints: Mapping[int, str]) -> Get:
    """GET with `client`, or InputError saying why there is no answer (ErrorAnswer for an error
    status, with the hint for it from `hints`)."""
    from kubernetes.client.exceptions import ApiException

    from webhook.kube.api_errors import short_reason

    def get(path: str, query: Mapping[str, str]) -> Any:
        try:
            method, url, headers, body, post = client.param_serialize(
                "GET",
                path,
                query_params=list(query.items()),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            response = client.call_api(method, url, headers, body, post, _request_timeout=(5, 60))
            response.read()
        except Exception as error:
            raise InputError(f"GET {path}: {short_reason(error)}") from None
        if not 200 <= response.status < 300:
            # The apiserver's own words, from the Status it answered with.
            why = short_reason(ApiException(http_resp=response))
            raise ErrorAnswer(f"GET {path}: {why}{hints.get(response.status, '')}", response.status)
        try:
            return json.loads(response.data or b"{}")
        except ValueError:
            raise InputError(f"GET {path}: the answer is not JSON") from None

    return get
