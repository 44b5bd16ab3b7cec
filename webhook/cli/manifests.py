"""Manifests as the offline tools take them, and the AdmissionReview the kube-apiserver would
send for creating one."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from typing import Any

from webhook.engine.workloads import pod_template_location

ADMISSION_REVIEW_KIND = "AdmissionReview"
DEFAULT_NAMESPACE = "default"

# The resource names of the kinds the webhook handles, as a request's `resource` names them.
RESOURCES = {
    "Pod": "pods",
    "PodTemplate": "podtemplates",
    "ReplicationController": "replicationcontrollers",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "ReplicaSet": "replicasets",
    "Job": "jobs",
    "CronJob": "cronjobs",
}


class NotAManifest(ValueError):
    """The object is not a Kubernetes object: no apiVersion, kind or metadata of the right type."""


@dataclass(frozen=True)
class Manifest:
    group: str
    version: str
    kind: str
    name: str
    namespace: str
    content: dict[str, Any]

    @property
    def handled(self) -> bool:
        """Whether the webhook judges this kind (it has a pod spec)."""
        return pod_template_location(self.group, self.kind) is not None


def is_admission_review(content: Any) -> bool:
    return isinstance(content, dict) and content.get("kind") == ADMISSION_REVIEW_KIND


def read_manifest(content: Any) -> Manifest:
    if not isinstance(content, dict):
        raise NotAManifest(f"not a Kubernetes object but a {_type_name(content)}")
    api_version, kind = content.get("apiVersion"), content.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise NotAManifest("not a Kubernetes object: apiVersion is missing or not a string")
    if not isinstance(kind, str) or not kind:
        raise NotAManifest("not a Kubernetes object: kind is missing or not a string")
    group, _, version = api_version.rpartition("/")
    metadata = content.get("metadata", {})
    if not isinstance(metadata, dict):
        raise NotAManifest(f"{kind}: metadata must be an object")
    name, namespace = metadata.get("name", ""), metadata.get("namespace", "")
    if not isinstance(name, str) or not isinstance(namespace, str):
        raise NotAManifest(f"{kind}: metadata.name and metadata.namespace must be strings")
    return Manifest(group, version, kind, name, namespace, content)


def creation_review(manifest: Manifest, namespace: str) -> dict[str, Any]:
    """A dry-run CREATE of `manifest` in `namespace`, as an admission.k8s.io/v1 AdmissionReview.
    The object is sent as written: offline, no apiserver defaulting has happened."""
    kind = {"group": manifest.group, "version": manifest.version, "kind": manifest.kind}
    resource = {
        "group": manifest.group,
        "version": manifest.version,
        "resource": RESOURCES.get(manifest.kind, manifest.kind.lower() + "s"),
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": ADMISSION_REVIEW_KIND,
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": manifest.name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "offline-review"},
            "object": copy.deepcopy(manifest.content),
            "oldObject": None,
            "dryRun": True,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return type(value).__name__
