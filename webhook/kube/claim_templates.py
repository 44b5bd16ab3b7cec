"""The ResourceClaimTemplates of DRA shares, made in the object's namespace before the webhook
admits it: a pod whose template is missing never schedules, so the webhook that names the
template is the one that makes it (the MutatingWebhookConfiguration says
`sideEffects: NoneOnDryRun`, and a dry run makes nothing).

A template's name is made from its content (dra_claims.py), so it is created once and never
changed. Each admission that needs one stamps it as needed (`last-needed`): on create, or with a
merge PATCH when it exists already; the sweep (template_sweep.py) removes only templates that
no object uses and that nobody needed for longer than its grace, which is far longer than any
admission takes. A process skips the stamp for `fresh_seconds` after it made one, so a
workload's replicas cost one call a minute, not one each.
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

from webhook.kube import raw_json
from webhook.kube.api_errors import short_reason
from webhook.policy.defaults import API_GROUP

LAST_NEEDED_ANNOTATION = f"{API_GROUP}/last-needed"
# Connect and read, for each of at most two calls: both inside the webhook's 5 s timeout
# (deploy/base/webhooks.yaml), which the apiserver holds the whole admission to.
REQUEST_TIMEOUT = (0.5, 1.5)
FRESH_SECONDS = 60.0
MAX_REMEMBERED = 10_000
HTTP_CONFLICT = 409
MERGE_PATCH = "application/merge-patch+json"


def stamp(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ClaimTemplateWriter:
    """Makes sure templates exist in a namespace; `ensure` returns why one could not be made,
    or None."""

    def __init__(
        self,
        client: ApiClient,
        *,
        clock: Callable[[], float] = time.time,
        fresh_seconds: float = FRESH_SECONDS,
    ) -> None:
        self._api = ResourceV1Api(client)
        self._clock = clock
        self._fresh_seconds = fresh_seconds
        self._stamped: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        for template in templates:
            problem = self._ensure_one(namespace, template)
            if problem is not None:
                return problem
        return None

    def _ensure_one(self, namespace: str, template: Mapping[str, Any]) -> str | None:
        name = template["metadata"]["name"]
        key = (namespace, name)
        now = self._clock()
        with self._lock:
            stamped = self._stamped.get(key)
        if stamped is not None and now - stamped < self._fresh_seconds:
            return None
        when = stamp(now)
        try:
            self._create(namespace, template, when)
        except ApiException as error:
            if error.status != HTTP_CONFLICT:
                return _could_not(namespace, name, error)
            try:
                found = self._stamp(namespace, name, when)
            except Exception as error:
                return _could_not(namespace, name, error)
            if found.get("spec") != template["spec"]:
                return (
                    f'ResourceClaimTemplate "{name}" in namespace "{namespace}" was not made by '
                    "this webhook (its spec differs from the one its name stands for): delete "
                    "it, and the webhook makes it anew"
                )
        except Exception as error:
            return _could_not(namespace, name, error)
        with self._lock:
            if len(self._stamped) >= MAX_REMEMBERED:
                self._stamped.clear()
            self._stamped[key] = now
        return None

    def _create(self, namespace: str, template: Mapping[str, Any], when: str) -> None:
        body = copy.deepcopy(dict(template))
        metadata = body["metadata"]
        metadata["namespace"] = namespace
        metadata["annotations"] = {**metadata.get("annotations", {}), LAST_NEEDED_ANNOTATION: when}
        raw_json.call(
            self._api.create_namespaced_resource_claim_template,
            namespace,
            body,
            _request_timeout=REQUEST_TIMEOUT,
        )

    def _stamp(self, namespace: str, name: str, when: str) -> Any:
        patch = {"metadata": {"annotations": {LAST_NEEDED_ANNOTATION: when}}}
        return raw_json.call(
            self._api.patch_namespaced_resource_claim_template,
            name,
            namespace,
            patch,
            _content_type=MERGE_PATCH,
            _request_timeout=REQUEST_TIMEOUT,
        )


def _could_not(namespace: str, name: str, error: BaseException) -> str:
    return (
        f'the GPU webhook could not make ResourceClaimTemplate "{name}" in namespace '
        f'"{namespace}", without which the pod never schedules ({short_reason(error)}): '
        "check that its ServiceAccount may create and patch resourceclaimtemplates, then retry"
    )
