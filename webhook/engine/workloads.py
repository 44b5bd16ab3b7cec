"""Where the pod spec sits in each kind of object the webhook handles."""

from __future__ import annotations

from dataclasses import dataclass

from webhook.field_paths import FieldPath as Path


@dataclass(frozen=True)
class PodTemplateLocation:
    """The paths, from the object's root, of the pod's metadata and spec."""

    metadata: Path
    spec: Path
    is_pod: bool = False


_TEMPLATE = PodTemplateLocation(("spec", "template", "metadata"), ("spec", "template", "spec"))

# Keyed by (API group, kind) as the AdmissionReview's `kind` names them.
POD_TEMPLATE_LOCATIONS: dict[tuple[str, str], PodTemplateLocation] = {
    ("", "Pod"): PodTemplateLocation(("metadata",), ("spec",), is_pod=True),
    ("", "PodTemplate"): PodTemplateLocation(("template", "metadata"), ("template", "spec")),
    ("", "ReplicationController"): _TEMPLATE,
    ("apps", "Deployment"): _TEMPLATE,
    ("apps", "StatefulSet"): _TEMPLATE,
    ("apps", "DaemonSet"): _TEMPLATE,
    ("apps", "ReplicaSet"): _TEMPLATE,
    ("batch", "Job"): _TEMPLATE,
    ("batch", "CronJob"): PodTemplateLocation(
        ("spec", "jobTemplate", "spec", "template", "metadata"),
        ("spec", "jobTemplate", "spec", "template", "spec"),
    ),
}


def pod_template_location(group: str, kind: str) -> PodTemplateLocation | None:
    """Where the pod spec is in objects of this kind, or None for kinds without one."""
    return POD_TEMPLATE_LOCATIONS.get((group, kind))
