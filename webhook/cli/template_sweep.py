"""The sweep of DRA shares' ResourceClaimTemplates: one pass that removes the templates this
webhook made (labelled managed-by=gpu-admission) once no object names them and nobody has
needed them for longer than a grace. The webhook makes a template before it admits the object
that names it (claim_templates.py) and never removes one: a template is needed for as long as a
Pod, or a workload whose controller will make Pods, names it, which only a look at every such
object can tell.

The pass lists the managed templates across namespaces, then every kind that may name one (the
kinds the webhook rewrites, each in the version discovery serves it in, page by page, with
scan's lister), and keeps only (namespace, template name) pairs of `spec.resourceClaims`. A
template is removed only on the word of every kind: where one is not served or cannot be read,
the pass deletes nothing and says which. A pass in which no template is past its grace reads
nothing more.

Why an admission running at the same time cannot lose its template. The pass reads its clock
(`now`) before it lists the templates, and lists the objects after. It deletes a template whose
copy, as listed, was last needed before `now - grace`, that no listed object names, and only
with that copy's `preconditions.resourceVersion`. Take an admission at time `a` that names it:
- if the admission stamps the template after the pass listed it, the stamp changes its
  resourceVersion: the DELETE fails with 409 Conflict, and the template is kept;
- otherwise the copy judged holds a stamp no older than `a - 60 s` (a writer skips the stamp
  only for 60 s after one it made), so `a < now - grace + 60 s`. The object is stored within its
  request's deadline (the webhook's timeout, 5 s; the apiserver's request timeout, 60 s at
  most), before `now - grace + 120 s`: before `now` whenever the grace is at least
  MIN_GRACE_SECONDS. The lists, made after `now` and read from etcd (no resourceVersion), hold
  the object, and the template is kept.
The default grace, 600 s, leaves room for clocks that disagree between the webhook's nodes and
the sweep's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient, ResourceV1Api, V1DeleteOptions, V1Preconditions
from kubernetes.client.exceptions import ApiException

from webhook.cli.errors import InputError
from webhook.cli.scan import PAGE_SIZE, ErrorAnswer, Get, list_all, served_collections
from webhook.engine.backends.dra_claims import CLAIM_API_VERSION, MANAGED_BY, MANAGED_BY_LABEL
from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS
from webhook.field_paths import FieldPath
from webhook.kube.api_errors import HTTP_FORBIDDEN, HTTP_NOT_FOUND, short_reason
from webhook.kube.claim_templates import FRESH_SECONDS, HTTP_CONFLICT, LAST_NEEDED_ANNOTATION

# The longest an admission request may take before its object is stored: the apiserver's
# default request timeout, which bounds every webhook's timeout too.
REQUEST_DEADLINE_SECONDS = 60.0
MIN_GRACE_SECONDS = FRESH_SECONDS + REQUEST_DEADLINE_SECONDS
TEMPLATES_PATH = f"/apis/{CLAIM_API_VERSION}/resourceclaimtemplates"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
DELETE_TIMEOUT = (5.0, 30.0)

# DELETE of one template with the resourceVersion of the copy judged: the HTTP status of the
# answer (0 when none came) and, unless it is a success, why in one line.
Delete = Callable[["TemplateRef", str], tuple[int, str]]


@dataclass(frozen=True, order=True)
class TemplateRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Judged:
    template: TemplateRef
    reason: str


@dataclass
class SweepReport:
    """What one pass did. `removed`: deleted (in a dry run: would be); `kept`: in use, needed
    within the grace, or stamped while the pass ran; `skipped`: past its grace and named by
    no object read, yet not removed, and why; `failed`: a DELETE the API refused or did not
    answer; `unread`: the kinds not read, and why (the pass then deletes nothing)."""

    dry_run: bool
    # False on a cluster that serves no resource.k8s.io/v1 (before 1.34): nothing to sweep.
    templates_served: bool = True
    removed: list[TemplateRef] = field(default_factory=list)
    kept: list[Judged] = field(default_factory=list)
    skipped: list[Judged] = field(default_factory=list)
    failed: list[Judged] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        if not self.templates_served:
            return (
                f"the cluster serves no {CLAIM_API_VERSION} ResourceClaimTemplates: none to sweep"
            )
        total = len(self.removed) + len(self.kept) + len(self.skipped) + len(self.failed)
        removed = "would be removed" if self.dry_run else "removed"
        return (
            f"{total} managed ResourceClaimTemplates: {len(self.removed)} {removed}, "
            f"{len(self.kept)} kept, {len(self.skipped)} skipped, {len(self.failed)} failed"
        )


@dataclass(frozen=True)
class _Listed:
    """A managed template as the pass judges it: small, whatever the template's size."""

    template: TemplateRef
    resource_version: str
    # When it was last needed (epoch seconds), or why that cannot be told.
    needed_at: float | None
    unknown_age: str = ""


def sweep(
    get: Get,
    delete: Delete,
    *,
    grace_seconds: float,
    dry_run: bool = False,
    page_size: int = PAGE_SIZE,
    clock: Callable[[], float] = time.time,
) -> SweepReport:
    """One pass (see the module's docstring). Raises ValueError for a grace shorter than
    MIN_GRACE_SECONDS, and InputError when the templates cannot be listed (a cluster that does
    not serve them has none to sweep)."""
    if not grace_seconds >= MIN_GRACE_SECONDS:  # NaN too: every age would be past it
        raise ValueError(
            f"a grace of {grace_seconds:g} s is shorter than {MIN_GRACE_SECONDS:g} s, the "
            "longest an admission may take to store the object after its stamp"
        )
    now = clock()  # before the templates are listed: see the module's docstring
    report = SweepReport(dry_run=dry_run)
    try:
        listed = [
            _listed(item)
            for item in list_all(get, TEMPLATES_PATH, page_size, label_selector=MANAGED_SELECTOR)
            if ((item.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_LABEL)
            == MANAGED_BY
        ]
    except ErrorAnswer as error:
        if error.status != HTTP_NOT_FOUND:
            raise
        # No such collection: the webhook, which makes templates in this version, made none.
        report.templates_served = False
        return report
    stale: list[_Listed] = []
    for template in listed:
        if template.needed_at is None:
            report.skipped.append(Judged(template.template, template.unknown_age))
        elif now - template.needed_at < grace_seconds:
            age = max(0, round(now - template.needed_at))
            reason = f"needed {age} s ago, within the grace of {grace_seconds:g} s"
            report.kept.append(Judged(template.template, reason))
        else:
            stale.append(template)
    if not stale:
        return report
    named = _named_templates(get, page_size, report.unread)
    for template in stale:
        ref = template.template
        if ref in named:
            report.kept.append(Judged(ref, "named by an object"))
        elif report.unread:
            why = f"not removed while {', '.join(report.unread)} could not be read"
            report.skipped.append(Judged(ref, why))
        elif dry_run:
            report.removed.append(ref)
        else:
            _delete(delete, template, report)
    return report


def _delete(delete: Delete, template: _Listed, report: SweepReport) -> None:
    ref = template.template
    status, why = delete(ref, template.resource_version)
    if 200 <= status < 300:
        report.removed.append(ref)
    elif status == HTTP_CONFLICT:
        # An admission stamped it (or it was made anew) after the pass read it.
        report.kept.append(Judged(ref, "changed since the pass read it"))
    elif status == HTTP_NOT_FOUND:
        report.skipped.append(Judged(ref, "already deleted"))
    else:
        report.failed.append(Judged(ref, why))


def _listed(item: Mapping[str, Any]) -> _Listed:
    metadata = item.get("metadata") or {}
    ref = TemplateRef(metadata.get("namespace", ""), metadata.get("name", ""))
    version = str(metadata.get("resourceVersion", ""))
    stamp = (metadata.get("annotations") or {}).get(LAST_NEEDED_ANNOTATION)
    source, text = (
        (LAST_NEEDED_ANNOTATION, stamp)
        if stamp is not None
        else ("creationTimestamp", metadata.get("creationTimestamp"))
    )
    when = _seconds(text)
    if when is None:
        why = f"its {source} {text!r} is not an RFC 3339 time: it is left alone"
        return _Listed(ref, version, None, why)
    return _Listed(ref, version, when)


def _seconds(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _named_templates(get: Get, page_size: int, unread: dict[str, str]) -> set[TemplateRef]:
    """The templates that the Pods and workloads of every served kind name; each kind that is
    not served or not read goes into `unread`, with why."""
    collections, unserved, unanswered = served_collections(get)
    unread.update(unanswered)
    unread.update((kind, "the cluster does not serve it") for kind in unserved)
    named: set[TemplateRef] = set()
    for collection in collections:
        group = collection.api_version.rpartition("/")[0]
        spec = POD_TEMPLATE_LOCATIONS[group, collection.kind].spec
        try:
            for item in list_all(get, collection.path, page_size):
                namespace = (item.get("metadata") or {}).get("namespace", "")
                named.update(TemplateRef(namespace, name) for name in _claim_templates(item, spec))
        except InputError as error:
            unread[collection.kind] = "; ".join(error.lines)
    return named


def _claim_templates(obj: Mapping[str, Any], spec_path: FieldPath) -> Iterator[str]:
    """The ResourceClaimTemplate names in the `spec.resourceClaims` of the pod spec at
    `spec_path`."""
    spec: Any = obj
    for key in spec_path:
        spec = spec.get(key) if isinstance(spec, Mapping) else None
    claims = spec.get("resourceClaims") if isinstance(spec, Mapping) else None
    for claim in claims if isinstance(claims, list) else ():
        name = claim.get("resourceClaimTemplateName") if isinstance(claim, Mapping) else None
        if isinstance(name, str) and name:
            yield name


def api_delete(client: ApiClient) -> Delete:
    """DELETE with `client`, with the precondition."""
    api = ResourceV1Api(client)

    def delete(template: TemplateRef, resource_version: str) -> tuple[int, str]:
        options = V1DeleteOptions(preconditions=V1Preconditions(resource_version=resource_version))
        try:
            api.delete_namespaced_resource_claim_template(
                template.name,
                template.namespace,
                body=options,
                _preload_content=False,
                _request_timeout=DELETE_TIMEOUT,
            )
        except ApiException as error:
            why = short_reason(error)
            if error.status == HTTP_FORBIDDEN:
                why += (
                    "; grant delete on resourceclaimtemplates (ClusterRole "
                    "gpu-claim-template-sweep, deploy/base/claim-template-sweep-rbac.yaml)"
                )
            return error.status or 0, why
        except Exception as error:  # no connection, a timeout
            return 0, short_reason(error)
        return 200, ""

    return delete
