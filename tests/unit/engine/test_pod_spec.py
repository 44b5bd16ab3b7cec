"""pod_spec.py: the checked, read-only view of a pod spec, and the text of what the engine
reads of a pod. A field of the wrong type is a MalformedObject that names the field."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from tests.unit.engine.builders import DEPLOYMENT, POD, container, deployment, pod, view
from webhook.engine.pod_spec import (
    MAX_ANNOTATION_BYTES,
    MalformedObject,
    PodParts,
    PodView,
    annotation_bytes,
    engine_input,
    is_named,
    labels_in,
    metadata_sent,
    pod_labels,
    pod_parts,
)


def malformed(call: Any) -> str:
    with pytest.raises(MalformedObject) as caught:
        call()
    return str(caught.value)


# MalformedObject ---------------------------------------------------------------------------


def test_malformed_object_names_the_field_as_kubectl_spells_it() -> None:
    error = MalformedObject(("spec", "containers", 0, "name"), "must be a string")
    assert (error.path, error.problem) == (("spec", "containers", 0, "name"), "must be a string")
    assert str(error) == "spec.containers[0].name: must be a string"
    assert isinstance(error, ValueError)


# Container -----------------------------------------------------------------------------------


TEMPLATE_OF_THREE = deployment(pod(container("main"), init=(container("a"), container("warmup"))))


@pytest.mark.parametrize(
    ("index", "path"),
    [
        (1, ("spec", "template", "spec", "initContainers", 1)),
        (2, ("spec", "template", "spec", "containers", 0)),
    ],
    ids=["an init container of a template", "a main container, counted in its own list"],
)
def test_container_path_from_the_objects_root(index: int, path: tuple[object, ...]) -> None:
    assert view(TEMPLATE_OF_THREE, DEPLOYMENT).containers[index].path == path


@pytest.mark.parametrize(
    ("index", "label"),
    [(1, 'init container "warmup"'), (2, 'container "main"')],
    ids=["an init container", "a main container"],
)
def test_container_label_as_messages_name_it(index: int, label: str) -> None:
    assert view(TEMPLATE_OF_THREE, DEPLOYMENT).containers[index].label == label


@pytest.mark.parametrize(
    ("fields", "env"),
    [
        ({}, []),
        ({"env": None}, []),
        ({"env": [{"name": "A", "value": "1"}]}, [{"name": "A", "value": "1"}]),
    ],
    ids=["absent", "null", "as written"],
)
def test_container_env_as_written(fields: dict[str, Any], env: list[Any]) -> None:
    assert view(pod(container("c", **fields))).containers[0].env() == env


def test_container_env_that_is_no_list_is_malformed() -> None:
    found = view(pod(container("c", env={"A": "1"}))).containers[0]
    assert malformed(found.env) == "spec.containers[0].env: must be a list, not an object"


@pytest.mark.parametrize(
    ("fields", "privileged"),
    [
        ({"securityContext": {"privileged": True}}, True),
        ({"securityContext": {"privileged": "true"}}, False),
        ({"securityContext": {"runAsUser": 0}}, False),
        ({}, False),
    ],
    ids=["privileged", "a string is not true", "root is not privileged", "no security context"],
)
def test_container_privileged_only_when_it_says_true(
    fields: dict[str, Any], privileged: bool
) -> None:
    assert view(pod(container("c", **fields))).containers[0].privileged is privileged


def test_container_privileged_of_a_security_context_that_is_no_object_is_malformed() -> None:
    found = view(pod(container("c", securityContext=["x"]))).containers[0]
    message = malformed(lambda: found.privileged)
    assert message == "spec.containers[0].securityContext: must be an object, not a list"


@pytest.mark.parametrize(
    ("resources", "claims"),
    [
        ({"claims": [{"name": "gpu"}]}, [{"name": "gpu"}]),
        ({"limits": {"cpu": "1"}}, []),
        (None, []),
    ],
    ids=["the claims it uses", "none in its resources", "no resources"],
)
def test_container_claim_references(resources: dict[str, Any] | None, claims: list[Any]) -> None:
    fields = {} if resources is None else {"resources": resources}
    assert view(pod(container("c", **fields))).containers[0].claim_references() == claims


def test_container_claim_references_that_are_no_list_are_malformed() -> None:
    found = view(pod(container("c", resources={"claims": "gpu"}))).containers[0]
    message = malformed(found.claim_references)
    assert message == "spec.containers[0].resources.claims: must be a list, not a string"


@pytest.mark.parametrize(
    ("obj", "sidecar"),
    [
        (pod(container("m"), init=(container("proxy", restartPolicy="Always"),)), True),
        (pod(container("m"), init=(container("warmup"),)), False),
        (pod(container("m"), init=(container("warmup", restartPolicy="OnFailure"),)), False),
    ],
    ids=[
        "an init container that always restarts",
        "an init container that runs to its end",
        "one that restarts only on failure",
    ],
)
def test_container_is_sidecar(obj: dict[str, Any], sidecar: bool) -> None:
    assert view(obj).containers[0].is_sidecar is sidecar


def test_container_is_sidecar_never_for_a_main_container() -> None:
    assert not view(pod(container("m", restartPolicy="Always"))).containers[0].is_sidecar


# PodView.read --------------------------------------------------------------------------------


def test_pod_view_read_lists_init_containers_first_with_their_limits_and_requests() -> None:
    obj = pod(
        container("main", {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"}),
        init=(container("warmup"),),
    )
    found = view(obj).containers
    assert [(c.kind, c.index, c.name) for c in found] == [
        ("initContainers", 0, "warmup"),
        ("containers", 0, "main"),
    ]
    assert dict(found[0].limits) == {} and dict(found[0].requests) == {}
    assert dict(found[1].limits) == {"nvidia.com/gpu": "1"} == dict(found[1].requests)


def test_pod_view_read_of_a_template_without_a_spec_has_no_containers() -> None:
    found = PodView.read({"spec": {}}, DEPLOYMENT)
    assert found.containers == () and dict(found.spec) == {}


@pytest.mark.parametrize(
    ("obj", "location", "message"),
    [
        (
            pod(container("a"), init=(container("a"),)),
            POD,
            'spec.containers[0].name: Duplicate value: "a" (also spec.initContainers[0]): give '
            "each container and init container a name of its own",
        ),
        ({"spec": {"containers": [5]}}, POD, "spec.containers[0]: must be an object, not a number"),
        (
            {"spec": {"containers": [{"image": "x"}]}},
            POD,
            "spec.containers[0].name: must be a string",
        ),
        (
            {"spec": {"containers": "c"}},
            POD,
            "spec.containers: must be a list, not a string",
        ),
        (
            pod(container("c", resources="1")),
            POD,
            "spec.containers[0].resources: must be an object, not a string",
        ),
        (
            pod(container("c", ["nvidia.com/gpu"])),
            POD,
            "spec.containers[0].resources.limits: must be an object, not a list",
        ),
        (
            {"spec": {"containers": [{"name": "c", "resources": {"requests": True}}]}},
            POD,
            "spec.containers[0].resources.requests: must be an object, not a boolean",
        ),
        (
            {"spec": {"template": "x"}},
            DEPLOYMENT,
            "spec.template: must be an object, not a string",
        ),
        (
            {"spec": {"containers": [{"name": f"c{i}"} for i in range(501)]}},
            POD,
            "spec.containers: 501 containers and init containers: at most 500 are admitted",
        ),
    ],
    ids=[
        "a name used twice across init and main containers",
        "a container that is no object",
        "a container without a name",
        "containers that are no list",
        "resources that are no object",
        "limits that are no object",
        "requests that are no object",
        "a template that is no object",
        "more containers than any real pod has",
    ],
)
def test_pod_view_read_refuses_a_malformed_pod_naming_the_field(
    obj: dict[str, Any], location: Any, message: str
) -> None:
    assert malformed(lambda: PodView.read(obj, location)) == message


def test_pod_view_read_admits_a_pod_of_exactly_the_most_containers() -> None:
    obj = {"spec": {"containers": [{"name": f"c{i}"} for i in range(500)]}}
    assert len(PodView.read(obj, POD).containers) == 500


def test_pod_view_of_parts_reads_the_same_view_as_read() -> None:
    obj = deployment(pod(container("c", {"nvidia.com/gpu": "1"})))
    assert PodView.of_parts(DEPLOYMENT, pod_parts(obj, DEPLOYMENT)) == PodView.read(obj, DEPLOYMENT)


# PodView's spec readers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "selector"),
    [({}, {}), ({"nodeSelector": None}, {}), ({"nodeSelector": {"a": "1"}}, {"a": "1"})],
    ids=["absent", "null", "as written"],
)
def test_pod_view_node_selector(spec: dict[str, Any], selector: dict[str, str]) -> None:
    assert dict(view(pod(**spec)).node_selector()) == selector


def test_pod_view_node_selector_that_is_no_object_is_malformed() -> None:
    found = view(pod(nodeSelector=["a"]))
    assert malformed(found.node_selector) == "spec.nodeSelector: must be an object, not a list"


@pytest.mark.parametrize(
    ("spec", "tolerations"),
    [({}, []), ({"tolerations": [{"operator": "Exists"}]}, [{"operator": "Exists"}])],
    ids=["absent", "as written"],
)
def test_pod_view_tolerations(spec: dict[str, Any], tolerations: list[Any]) -> None:
    assert view(pod(**spec)).tolerations() == tolerations


def test_pod_view_tolerations_that_are_no_list_are_malformed() -> None:
    found = view(pod(container(), tolerations={"key": "x"}))
    assert malformed(found.tolerations) == "spec.tolerations: must be a list, not an object"


@pytest.mark.parametrize(
    ("spec", "name"),
    [({}, None), ({"runtimeClassName": "nvidia"}, "nvidia")],
    ids=["absent", "as written"],
)
def test_pod_view_runtime_class_name(spec: dict[str, Any], name: str | None) -> None:
    assert view(pod(**spec)).runtime_class_name() == name


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (5, "spec.runtimeClassName: must be a string, not a number"),
        (True, "spec.runtimeClassName: must be a string, not a boolean"),
    ],
    ids=["a number", "a boolean"],
)
def test_pod_view_runtime_class_name_that_is_no_string_is_malformed(
    value: object, message: str
) -> None:
    assert malformed(view(pod(runtimeClassName=value)).runtime_class_name) == message


@pytest.mark.parametrize(
    ("spec", "name"),
    [({}, None), ({"schedulerName": "kai-scheduler"}, "kai-scheduler")],
    ids=["absent", "as written"],
)
def test_pod_view_scheduler_name(spec: dict[str, Any], name: str | None) -> None:
    assert view(pod(**spec)).scheduler_name() == name


def test_pod_view_scheduler_name_that_is_no_string_is_malformed() -> None:
    message = malformed(view(pod(schedulerName=["a"])).scheduler_name)
    assert message == "spec.schedulerName: must be a string, not a list"


@pytest.mark.parametrize(
    ("spec", "name"),
    [({}, None), ({"nodeName": ""}, None), ({"nodeName": "gpu-7"}, "gpu-7")],
    ids=["absent", "empty is no node", "as written"],
)
def test_pod_view_node_name(spec: dict[str, Any], name: str | None) -> None:
    assert view(pod(**spec)).node_name() == name


@pytest.mark.parametrize(
    ("spec", "claims"),
    [
        ({}, []),
        (
            {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            [{"name": "gpu", "resourceClaimTemplateName": "t"}],
        ),
    ],
    ids=["absent", "as written"],
)
def test_pod_view_resource_claims(spec: dict[str, Any], claims: list[Any]) -> None:
    assert view(pod(**spec)).resource_claims() == claims


def test_pod_view_labels_of_a_pod_and_of_a_template() -> None:
    obj = pod()
    obj["metadata"]["labels"] = {"kai.scheduler/queue": "q"}
    assert dict(view(obj).labels()) == {"kai.scheduler/queue": "q"}
    assert dict(view(deployment(obj), DEPLOYMENT).labels()) == {"kai.scheduler/queue": "q"}
    assert dict(view(pod()).labels()) == {}


def test_pod_view_labels_that_are_no_object_are_malformed() -> None:
    obj = deployment(pod())
    obj["spec"]["template"]["metadata"]["labels"] = "q"
    message = malformed(view(obj, DEPLOYMENT).labels)
    assert message == "spec.template.metadata.labels: must be an object, not a string"


TERMS = [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]


@pytest.mark.parametrize(
    ("affinity", "terms"),
    [
        (None, None),
        ({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}, None),
        ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}, None),
        (
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": TERMS}
                }
            },
            TERMS,
        ),
        ({"podAffinity": {}}, None),
    ],
    ids=[
        "no affinity",
        "a preference only",
        "an empty requirement",
        "the terms of a requirement",
        "pod affinity is not node affinity",
    ],
)
def test_pod_view_required_node_selector_terms(
    affinity: dict[str, Any] | None, terms: list[Any] | None
) -> None:
    spec = {} if affinity is None else {"affinity": affinity}
    assert view(pod(**spec)).required_node_selector_terms() == terms


def test_pod_view_required_node_selector_terms_that_are_no_list_are_malformed() -> None:
    required = {"nodeSelectorTerms": "zone"}
    found = view(
        pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}})
    )
    with pytest.raises(MalformedObject) as caught:
        found.required_node_selector_terms()
    assert caught.value.problem == "must be a list, not a string"
    assert caught.value.path == (
        "spec",
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )


@pytest.mark.parametrize(
    ("obj", "name"),
    [
        (pod(container("main"), init=(container("warmup"),)), "main"),
        (pod(container("a"), container("b")), "a"),
        ({"spec": {"initContainers": [{"name": "warmup"}]}}, None),
    ],
    ids=["init containers are passed over", "the first of the main ones", "no main container"],
)
def test_pod_view_first_container_is_the_first_main_one(
    obj: dict[str, Any], name: str | None
) -> None:
    found = view(obj).first_container()
    assert (found.name if found else None) == name


@pytest.mark.parametrize(
    ("name", "found"),
    [("warmup", ("initContainers", 0)), ("b", ("containers", 1)), ("nope", None)],
    ids=["an init container", "a main container", "none of that name"],
)
def test_pod_view_container_named(name: str, found: tuple[str, int] | None) -> None:
    obj = pod(container("a"), container("b"), init=(container("warmup"),))
    named = view(obj).container_named(name)
    assert ((named.kind, named.index) if named else None) == found


# pod_parts, labels -----------------------------------------------------------------------------


def test_pod_parts_of_a_pod_has_no_owner_labels() -> None:
    obj = pod(annotations={"a": "1"})
    parts = pod_parts(obj, POD)
    assert parts == PodParts(obj["metadata"], {"a": "1"}, obj["spec"], None)


@pytest.mark.parametrize(
    ("metadata", "owner_labels"),
    [
        ({"labels": {"kai.scheduler/queue": "q"}}, {"kai.scheduler/queue": "q"}),
        ({}, {}),
        ({"labels": {"app": "x"}, "ownerReferences": [{"kind": "Deployment"}]}, None),
    ],
    ids=[
        "a workload nothing owns gives its labels",
        "and an empty map where it has none",
        "a workload another object owns gives none",
    ],
)
def test_pod_parts_of_a_template_has_the_top_owners_labels(
    metadata: dict[str, Any], owner_labels: dict[str, str] | None
) -> None:
    parts = pod_parts(deployment(pod(), **metadata), DEPLOYMENT)
    assert parts.owner_labels == owner_labels


def test_pod_parts_of_an_object_without_its_template_reads_empty_parts() -> None:
    parts = pod_parts({"metadata": {"name": "d"}}, DEPLOYMENT)
    assert (dict(parts.metadata), dict(parts.annotations), dict(parts.spec)) == ({}, {}, {})


def test_pod_parts_refuses_annotations_longer_than_the_apiserver_keeps() -> None:
    obj = deployment(pod(annotations={"a": "x" * MAX_ANNOTATION_BYTES}))
    message = malformed(lambda: pod_parts(obj, DEPLOYMENT))
    assert message == (
        "spec.template.metadata.annotations: Too long: must have at most 262144 bytes"
    )
    at_the_limit = pod(annotations={"a": "x" * (MAX_ANNOTATION_BYTES - 1)})
    assert pod_parts(at_the_limit, POD).annotations == at_the_limit["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("annotations", "size"),
    [
        ({"ab": "cd"}, 4),
        ({"k": 5}, 1),
        ({"k": "é" * 70000}, 1 + 2 * 70000),
        ({"k": "\ud800" * 70000}, 1 + 3 * 70000),
        ({"€": "x" * 70000}, 3 + 70000),
    ],
    ids=[
        "keys and values",
        "a value that is no string counts nothing",
        "two bytes a character past a quarter of the limit",
        "a lone surrogate counts the three bytes it is written in",
        "keys are counted in UTF-8 too",
    ],
)
def test_annotation_bytes_counts_keys_and_string_values(
    annotations: dict[str, Any], size: int
) -> None:
    assert annotation_bytes(annotations) == size


def test_pod_labels_of_a_template_are_its_pods_labels() -> None:
    obj = deployment(pod())
    obj["spec"]["template"]["metadata"]["labels"] = {"app": "infer"}
    assert dict(pod_labels(obj, DEPLOYMENT)) == {"app": "infer"}
    assert dict(pod_labels(pod(), POD)) == {}


def test_pod_labels_refuses_a_value_that_is_no_string() -> None:
    obj = deployment(pod())
    obj["spec"]["template"]["metadata"]["labels"] = {"tier": 1}
    message = malformed(lambda: pod_labels(obj, DEPLOYMENT))
    assert message == "spec.template.metadata.labels.tier: must be a string, not a number"


def test_labels_in_reads_the_metadata_pod_parts_found() -> None:
    assert dict(labels_in({"labels": {"app": "x"}}, POD)) == {"app": "x"}
    assert malformed(lambda: labels_in({"labels": {"app": None}}, POD)) == (
        "metadata.labels.app: must be a string, not a number"
    )


# engine_input ----------------------------------------------------------------------------------


def text(obj: dict[str, Any], location: Any = POD, gives_labels: bool = False) -> str | None:
    return engine_input(location, pod_parts(obj, location), gives_labels)


def with_labels(obj: dict[str, Any], labels: dict[str, str] | None) -> dict[str, Any]:
    if labels is not None:
        obj["metadata"]["labels"] = labels
    return obj


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (pod(), {**pod(), "metadata": {"name": "other"}}),
        (with_labels(pod(), {"app": "a"}), with_labels(pod(), {"app": "b"})),
        (pod(container("c", image="a")), pod(container("c", image="b"))),
        (pod(priority=1), pod(priority=2)),
    ],
    ids=[
        "another name",
        "another label no backend gives",
        "another image",
        "another field the engine never reads",
    ],
)
def test_engine_input_is_the_same_for_pods_the_engine_reads_alike(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    assert text(first) is not None
    assert text(first) == text(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (pod(), pod(nodeSelector=None)),
        (pod(), pod(nodeSelector={})),
        (pod(annotations={"a": "1"}), pod(annotations={"a": "2"})),
        (
            with_labels(pod(), {"kai.scheduler/queue": "a"}),
            with_labels(pod(), {"kai.scheduler/queue": "b"}),
        ),
        (
            pod(container("c", {"nvidia.com/gpu": "1"})),
            pod(container("c", {"nvidia.com/gpu": "2"})),
        ),
        (pod(container("c", env=[])), pod(container("c"))),
        (pod(container("c", restartPolicy="Always")), pod(container("c"))),
        (pod(schedulerName="a"), pod(schedulerName="b")),
        (pod(runtimeClassName="nvidia"), pod()),
        (pod(nodeName="n"), pod()),
        (pod(tolerations=[]), pod()),
        (pod(affinity={}), pod()),
        (pod(resourceClaims=[]), pod()),
        (pod(container("c", securityContext={"privileged": True})), pod(container("c"))),
        ({**pod(), "metadata": None}, pod()),
    ],
    ids=[
        "an absent node selector is not a null one",
        "nor an empty one",
        "annotations",
        "a label a backend gives",
        "resources",
        "an empty env is not an absent one",
        "a restart policy",
        "the scheduler",
        "the runtime class",
        "the node",
        "tolerations",
        "affinity",
        "resource claims",
        "a security context",
        "metadata that is null",
    ],
)
def test_engine_input_differs_wherever_the_outcome_may(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    assert text(first) != text(second)


def test_engine_input_holds_whether_there_is_a_labels_map_only_where_labels_are_given() -> None:
    without, empty = pod(), with_labels(pod(), {})
    assert text(without) == text(empty)
    assert text(without, gives_labels=True) != text(empty, gives_labels=True)


def test_engine_input_holds_the_owners_backend_labels() -> None:
    first = deployment(pod(), labels={"kai.scheduler/queue": "a"})
    second = deployment(pod(), labels={"kai.scheduler/queue": "b"})
    third = deployment(pod(), labels={"kai.scheduler/queue": "a", "app": "x"})
    assert text(first, DEPLOYMENT) != text(second, DEPLOYMENT)
    assert text(first, DEPLOYMENT) == text(third, DEPLOYMENT)


@pytest.mark.parametrize(
    "obj",
    [
        pod(annotations={"when": datetime.date(2024, 1, 1)}),
        {"spec": {"containers": "c"}},
        {"spec": {"containers": ["c"]}},
    ],
    ids=["a value that is no JSON", "containers that are no list", "a container that is no object"],
)
def test_engine_input_is_none_for_a_pod_to_judge_afresh(obj: dict[str, Any]) -> None:
    assert text(obj) is None


# metadata_sent ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "location", "marks"),
    [
        ({"metadata": {}}, POD, "d"),
        ({}, POD, "a"),
        ({"metadata": None}, POD, "n"),
        ({"metadata": "x"}, POD, "v"),
        ({"spec": {"template": {"metadata": {}}}}, DEPLOYMENT, "ddd"),
        ({"spec": {"template": {}}}, DEPLOYMENT, "dda"),
        ({"spec": {"template": {"metadata": None}}}, DEPLOYMENT, "ddn"),
        ({"spec": {"template": None}}, DEPLOYMENT, "dn"),
        ({"spec": []}, DEPLOYMENT, "v"),
    ],
    ids=[
        "a pod's metadata sent",
        "absent",
        "null",
        "another value",
        "a template's metadata sent",
        "a template without metadata",
        "a template with null metadata",
        "a null template stops there",
        "a spec that is no object stops there",
    ],
)
def test_metadata_sent_marks_each_step_to_the_metadata(
    obj: dict[str, Any], location: Any, marks: str
) -> None:
    assert metadata_sent(obj, location) == marks


@pytest.mark.parametrize(
    ("item", "named"),
    [({"name": "gpu"}, True), ({"name": "other"}, False), ("gpu", False), ({}, False)],
    ids=["an entry of that name", "an entry of another", "no entry at all", "no name"],
)
def test_is_named(item: object, named: bool) -> None:
    assert is_named(item, "gpu") is named


def test_pod_view_claim_named_and_container_uses_claim() -> None:
    claims = [{"name": "gpu", "resourceClaimTemplateName": "t"}, "junk", {"name": "other"}]
    found = view(
        pod(
            container("c", resources={"claims": [{"name": "gpu"}]}),
            resourceClaims=claims,
        )
    )
    assert found.claim_named("gpu") == {"name": "gpu", "resourceClaimTemplateName": "t"}
    assert found.claim_named("missing") is None
    assert found.containers[0].uses_claim("gpu")
    assert not found.containers[0].uses_claim("other")
