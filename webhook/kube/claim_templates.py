"""The ResourceClaimTemplates of DRA shares, made in the object's namespace before the webhook
admits it: a pod whose template is missing never schedules, so the webhook that names the
template is the one that makes it (the MutatingWebhookConfiguration says
`sideEffects: NoneOnDryRun`, and a dry run makes nothing).

A template's name is made from its content (dra_claims.py), so it is created once and never
changed. Each admission that needs one stamps it as needed (`last-needed`): on create, or with a
merge PATCH when it exists already; the sweep (template_sweep.py) removes only templates that
no object uses and that nobody needed for longer than its grace, which is far longer than any
admission takes. A process skips the stamp for `fresh_seconds` after it made one, so a
workload's replicas cost one call a minute, not one each. The calls of one admission share
one budget, inside the webhook's timeout.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import ApiClient, ResourceV1Api
from kubernetes.client.exceptions import ApiException

from webhook.engine.backends.dra_claims import SPEC_DIGEST_ANNOTATION, asks_capacity
from webhook.kube import raw_json
from webhook.kube.api_errors import short_reason
from webhook.policy.defaults import API_GROUP

LAST_NEEDED_ANNOTATION = f"{API_GROUP}/last-needed"
# The webhook's 5 s timeout (deploy/base/webhooks.yaml) holds the whole admission: making its
# templates gets this much of it, across every call; a connection gets at most CONNECT_TIMEOUT.
BUDGET_SECONDS = 3.5
CONNECT_TIMEOUT = 0.5
FRESH_SECONDS = 60.0
MAX_REMEMBERED = 10_000
HTTP_CONFLICT = 409
MERGE_PATCH = "application/merge-patch+json"


def stamp(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class OutOfTime(Exception):
    """The admission's budget for its templates ran out before a call could be made."""


class ClaimTemplateWriter:
    """Makes sure templates exist in a namespace; `ensure` returns why one could not be made,
    or None."""

    def __init__(
        self,
        client: ApiClient,
        *,
        clock: Callable[[], float] = time.time,
        fresh_seconds: float = FRESH_SECONDS,
        budget_seconds: float = BUDGET_SECONDS,
    ) -> None:
        self._api = ResourceV1Api(client)
        self._clock = clock
        self._fresh_seconds = fresh_seconds
        self._budget_seconds = budget_seconds
        self._stamped: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        deadline = time.monotonic() + self._budget_seconds
        for template in templates:
            problem = self._ensure_one(namespace, template, deadline)
            if problem is not None:
                return problem
        return None

    def _ensure_one(
        self, namespace: str, template: Mapping[str, Any], deadline: float
    ) -> str | None:
        name = template["metadata"]["name"]
        key = (namespace, name)
        now = self._clock()
        with self._lock:
            stamped = self._stamped.get(key)
        if stamped is not None and now - stamped < self._fresh_seconds:
            return None
        when = stamp(now)
        try:
            try:
                stored = self._create(namespace, template, when, deadline)
            except ApiException as error:
                if error.status != HTTP_CONFLICT:
                    raise
                stored = self._stamp(namespace, name, when, deadline)
        except Exception as error:
            return _could_not(namespace, name, error)
        problem = _differs(stored, template)
        if problem is not None:
            return f'ResourceClaimTemplate "{name}" in namespace "{namespace}" {problem}'
        with self._lock:
            if len(self._stamped) >= MAX_REMEMBERED:
                self._stamped.clear()
            self._stamped[key] = now
        return None

    def _create(
        self, namespace: str, template: Mapping[str, Any], when: str, deadline: float
    ) -> Any:
        body = copy.deepcopy(dict(template))
        metadata = body["metadata"]
        metadata["namespace"] = namespace
        metadata["annotations"] = {**metadata.get("annotations", {}), LAST_NEEDED_ANNOTATION: when}
        return raw_json.call(
            self._api.create_namespaced_resource_claim_template,
            namespace,
            body,
            _request_timeout=_timeout(deadline),
        )

    def _stamp(self, namespace: str, name: str, when: str, deadline: float) -> Any:
        patch = {"metadata": {"annotations": {LAST_NEEDED_ANNOTATION: when}}}
        return raw_json.call(
            self._api.patch_namespaced_resource_claim_template,
            name,
            namespace,
            patch,
            _content_type=MERGE_PATCH,
            _request_timeout=_timeout(deadline),
        )


def _timeout(deadline: float) -> tuple[float, float]:
    left = deadline - time.monotonic()
    if left <= 0.05:
        raise OutOfTime("no time was left of the webhook's timeout")
    return min(CONNECT_TIMEOUT, left), left


def _differs(stored: Any, template: Mapping[str, Any]) -> str | None:
    """Why the stored template is not the one wanted, or None. The apiserver stores it with its
    defaults and quantities in canonical form, so the spec is compared by the digest the
    webhook wrote beside it; and a gated field it dropped (DRAConsumableCapacity off) would
    make every share a whole GPU."""
    metadata = stored.get("metadata") or {}
    wanted = template["metadata"]["annotations"][SPEC_DIGEST_ANNOTATION]
    if (metadata.get("annotations") or {}).get(SPEC_DIGEST_ANNOTATION) != wanted:
        return (
            "was not made by this webhook (it lacks the digest of the spec its name stands "
            "for): delete it, and the webhook makes it anew"
        )
    if asks_capacity(template["spec"]) and not asks_capacity(stored.get("spec")):
        return (
            "was stored without its capacity request: the apiserver drops it while its feature "
            "gate DRAConsumableCapacity is off (off by default before Kubernetes 1.36), and the "
            "claim would take a whole GPU: turn the gate on (docs/backends/dra.md)"
        )
    return None


def _could_not(namespace: str, name: str, error: BaseException) -> str:
    return (
        f'the GPU webhook could not make ResourceClaimTemplate "{name}" in namespace '
        f'"{namespace}", without which the pod never schedules ({short_reason(error)}): '
        "check that its ServiceAccount may create and patch resourceclaimtemplates, then retry"
    )
