"""Pods, their containers and Deployments, as the apiserver would send them, for unit tests;
and the engine's view of one."""

from __future__ import annotations

from typing import Any

from webhook.engine.pod_spec import PodView
from webhook.engine.workloads import PodTemplateLocation, pod_template_location


def container(
    name: str,
    limits: Any = None,
    requests: Any = None,
    **fields: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "cuda:12", **fields}
    # As given: a test may write a map of the wrong type on purpose.
    resources = {
        key: amounts
        for key, amounts in (("limits", limits), ("requests", requests))
        if amounts is not None
    }
    if resources:
        body["resources"] = resources
    return body


def pod(
    *containers: dict[str, Any],
    annotations: dict[str, Any] | None = None,
    labels: dict[str, Any] | None = None,
    init: tuple[dict[str, Any], ...] = (),
    lone: str = "c",
    **spec: Any,
) -> dict[str, Any]:
    """A Pod of these containers (one named `lone`, without resources, where none is given)."""
    metadata: dict[str, Any] = {"name": "p"}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if labels is not None:
        metadata["labels"] = dict(labels)
    body: dict[str, Any] = {"containers": list(containers or (container(lone),)), **spec}
    if init:
        body["initContainers"] = list(init)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def deployment(of: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """A Deployment named d (with these metadata fields) whose template is the pod `of`."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", **metadata},
        "spec": {"template": {"metadata": of["metadata"], "spec": of["spec"]}},
    }


def view(obj: dict[str, Any], location: PodTemplateLocation | None = None) -> PodView:
    """The engine's view of a Pod or a workload's template, where its kind puts it."""
    if location is None:
        group = obj["apiVersion"].rpartition("/")[0]
        location = pod_template_location(group, obj["kind"])
        assert location is not None, obj["kind"]
    return PodView.read(obj, location)
