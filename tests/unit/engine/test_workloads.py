"""workloads.py: where the pod spec sits in each kind of object the webhook handles."""

from __future__ import annotations

import pytest

from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS, pod_template_location

TEMPLATE = (("spec", "template", "metadata"), ("spec", "template", "spec"), False)


@pytest.mark.parametrize(
    ("group", "kind", "where"),
    [
        ("", "Pod", (("metadata",), ("spec",), True)),
        ("", "PodTemplate", (("template", "metadata"), ("template", "spec"), False)),
        ("", "ReplicationController", TEMPLATE),
        ("apps", "Deployment", TEMPLATE),
        ("apps", "StatefulSet", TEMPLATE),
        ("apps", "DaemonSet", TEMPLATE),
        ("apps", "ReplicaSet", TEMPLATE),
        ("batch", "Job", TEMPLATE),
        (
            "batch",
            "CronJob",
            (
                ("spec", "jobTemplate", "spec", "template", "metadata"),
                ("spec", "jobTemplate", "spec", "template", "spec"),
                False,
            ),
        ),
    ],
    ids=[
        "a pod is its own spec",
        "a pod template holds it under template",
        "a replication controller under spec.template",
        "a deployment under spec.template",
        "a stateful set under spec.template",
        "a daemon set under spec.template",
        "a replica set under spec.template",
        "a job under spec.template",
        "a cron job under its job template",
    ],
)
def test_pod_template_location_of_each_kind_with_a_pod_spec(
    group: str, kind: str, where: tuple[object, object, bool]
) -> None:
    location = pod_template_location(group, kind)
    assert location is not None
    assert (location.metadata, location.spec, location.is_pod) == where


@pytest.mark.parametrize(
    ("group", "kind"),
    [("", "Service"), ("apps", "Pod"), ("", "Deployment"), ("batch", "CronJobs"), ("", "pod")],
    ids=[
        "a kind without a pod spec",
        "a pod in another group",
        "a deployment in the core group",
        "a plural is not a kind",
        "kinds are case sensitive",
    ],
)
def test_pod_template_location_is_none_for_kinds_without_one(group: str, kind: str) -> None:
    assert pod_template_location(group, kind) is None


def test_pod_template_location_covers_the_eight_kinds_of_the_design_and_pods() -> None:
    assert sorted(kind for _, kind in POD_TEMPLATE_LOCATIONS) == [
        "CronJob",
        "DaemonSet",
        "Deployment",
        "Job",
        "Pod",
        "PodTemplate",
        "ReplicaSet",
        "ReplicationController",
        "StatefulSet",
    ]
