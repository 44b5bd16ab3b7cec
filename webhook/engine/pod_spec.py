"""A checked, read-only view of the parts of a pod spec the engine reads.

Objects arrive as decoded JSON and may hold anything; a field of the wrong type becomes a
`MalformedObject` that names the field, which the webhook turns into a denial.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, NoReturn

from webhook.engine.workloads import Path, PodTemplateLocation
from webhook.field_paths import format_field
from webhook.policy.model import BACKEND_LABELS

ContainerList = Literal["initContainers", "containers"]
CONTAINER_LISTS: tuple[ContainerList, ...] = ("initContainers", "containers")
# The apiserver's TotalAnnotationSizeLimitB: keys and values together, in bytes.
MAX_ANNOTATION_BYTES = 256 * 1024
# Containers and init containers read in one pod: far beyond any real pod, and a bound on the
# work one review can cause.
MAX_CONTAINERS = 500


class MalformedObject(ValueError):
    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{format_field(path)}: {problem}")


def _refuse(value: object) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _compact_encoder() -> Callable[[Any], str]:
    """Compact JSON, no check for cycles (decoded JSON has none). JSONEncoder.encode makes its
    C encoder again at every call; this one is made once, where the interpreter has it."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(check_circular=False, separators=(",", ":")).encode
    encoder = make(
        None, _refuse, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    # It gives the text in one piece or, in some versions, in several.
    return lambda value: "".join(encoder(value, 0))


_encode_compact = _compact_encoder()


# What an absent mapping reads as. Shared, and never written: the engine writes through its
# patch recorder only.
_NOTHING: dict[str, Any] = {}


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def is_named(item: object, name: str) -> bool:
    """Whether a list entry of the spec (a claim, a claim reference) has this name."""
    return isinstance(item, dict) and item.get("name") == name


def _mapping(node: Mapping[str, Any], key: str, path: Path) -> Mapping[str, Any]:
    value = node.get(key)
    if value is None:
        return _NOTHING
    if not isinstance(value, dict):
        raise MalformedObject((*path, key), f"must be an object, not {_json_type(value)}")
    return value


def _list(node: Mapping[str, Any], key: str, path: Path) -> list[Any]:
    value = node.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedObject((*path, key), f"must be a list, not {_json_type(value)}")
    return value


def _json_type(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _resolve(root: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    node: Any = root
    for key in path:
        node = node.get(key)
        if type(node) is not dict:
            return _slow_resolve(root, path)
    return node


def _slow_resolve(root: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    """_resolve where a part is absent or of the wrong type: which, and where, is worked out
    only then."""
    node: Any = root
    for index, key in enumerate(path):
        node = _mapping(node, str(key), path[:index])
    return node


# Read for every request: slots rather than frozen, whose __init__ costs five times as much.
@dataclass(slots=True)
class Container:
    kind: ContainerList
    index: int
    name: str
    spec_path: Path
    raw: Mapping[str, Any]
    limits: Mapping[str, Any]
    requests: Mapping[str, Any]

    @property
    def path(self) -> Path:
        return (*self.spec_path, self.kind, self.index)

    @property
    def label(self) -> str:
        """How messages name it: `container "serve"`, `init container "warmup"`."""
        noun = "init container" if self.kind == "initContainers" else "container"
        return f'{noun} "{self.name}"'

    def env(self) -> list[Any]:
        return _list(self.raw, "env", self.path)

    @property
    def privileged(self) -> bool:
        """Whether its securityContext says `privileged: true` (the one test HAMi makes)."""
        context = _mapping(self.raw, "securityContext", self.path)
        return context.get("privileged") is True

    def claim_references(self) -> list[Any]:
        """Its `resources.claims`: the pod's resource claims it uses, by name."""
        resources = _mapping(self.raw, "resources", self.path)
        return _list(resources, "claims", (*self.path, "resources"))

    def uses_claim(self, name: str) -> bool:
        return any(is_named(reference, name) for reference in self.claim_references())

    @property
    def is_sidecar(self) -> bool:
        """An init container that keeps running beside the main ones (restartPolicy Always)."""
        return self.kind == "initContainers" and self.raw.get("restartPolicy") == "Always"


@dataclass(slots=True)
class PodView:
    """The engine reads a pod only through this view: its annotations, its containers' names,
    resources, env and securityContext, its labels, and the spec's nodeSelector, tolerations,
    affinity, runtimeClassName, schedulerName, nodeName and resourceClaims.
    `engine_input` lists exactly these; a new reader must be added there too (a test reads
    every scenario through a spec that notes what is read, and fails when the key lacks it)."""

    location: PodTemplateLocation
    metadata: Mapping[str, Any]
    annotations: Mapping[str, Any]
    spec: Mapping[str, Any]
    containers: tuple[Container, ...]
    # The labels of the workload that is its pods' top owner, where this is one (PodParts).
    owner_labels: Mapping[str, Any] | None = None

    @classmethod
    def read(cls, obj: Mapping[str, Any], location: PodTemplateLocation) -> PodView:
        return cls.of_parts(location, pod_parts(obj, location))

    @classmethod
    def of_parts(cls, location: PodTemplateLocation, parts: PodParts) -> PodView:
        """The view of a pod whose `pod_parts` the caller has already."""
        metadata, annotations, spec, owner_labels = parts
        containers = _read_containers(spec, location.spec)
        return cls(location, metadata, annotations, spec, containers, owner_labels)

    def node_selector(self) -> Mapping[str, Any]:
        return _mapping(self.spec, "nodeSelector", self.location.spec)

    def tolerations(self) -> list[Any]:
        return _list(self.spec, "tolerations", self.location.spec)

    def runtime_class_name(self) -> str | None:
        return self._spec_string("runtimeClassName")

    def resource_claims(self) -> list[Any]:
        """`spec.resourceClaims`: the claims its containers may use, each made from a
        template or named."""
        return _list(self.spec, "resourceClaims", self.location.spec)

    def claim_named(self, name: str) -> Mapping[str, Any] | None:
        """The pod's resource claim of this name, as written; None where it has none."""
        return next((c for c in self.resource_claims() if is_named(c, name)), None)

    def scheduler_name(self) -> str | None:
        return self._spec_string("schedulerName")

    def node_name(self) -> str | None:
        """The node the pod is bound to as written, which no scheduler then places."""
        return self._spec_string("nodeName") or None

    def labels(self) -> Mapping[str, Any]:
        """The pod's labels, of which the engine reads only those a backend gives
        (`BACKEND_LABELS`)."""
        return _mapping(self.metadata, "labels", self.location.metadata)

    def _spec_string(self, key: str) -> str | None:
        value = self.spec.get(key)
        if value is not None and type(value) is not str:
            path = (*self.location.spec, key)
            raise MalformedObject(path, f"must be a string, not {_json_type(value)}")
        return value

    def required_node_selector_terms(self) -> list[Any] | None:
        """The terms of a required node affinity, or None when the pod has none."""
        path = self.location.spec
        affinity = _mapping(self.spec, "affinity", path)
        node_affinity = _mapping(affinity, "nodeAffinity", (*path, "affinity"))
        required = _mapping(node_affinity, _REQUIRED, (*path, "affinity", "nodeAffinity"))
        if not required:
            return None
        required_path = (*path, "affinity", "nodeAffinity", _REQUIRED)
        return _list(required, "nodeSelectorTerms", required_path)

    def first_container(self) -> Container | None:
        for container in self.containers:
            if container.kind == "containers":
                return container
        return None

    def container_named(self, name: str) -> Container | None:
        for container in self.containers:
            if container.name == name:
                return container
        return None


class PodParts(NamedTuple):
    """The pod's (or template's) metadata, annotations and spec, their contents not yet read."""

    metadata: Mapping[str, Any]
    annotations: Mapping[str, Any]
    spec: Mapping[str, Any]
    # The workload's own labels where it is the top owner of the pods it makes (it has no
    # ownerReferences): a scheduler may read them before the pods' own (KAI's queue). None
    # for a pod, and for a workload another object owns.
    owner_labels: Mapping[str, Any] | None = None


def _top_owner_labels(
    obj: Mapping[str, Any], location: PodTemplateLocation
) -> Mapping[str, Any] | None:
    if location.is_pod:
        return None
    metadata = _mapping(obj, "metadata", ())
    if metadata.get("ownerReferences"):
        return None
    return _mapping(metadata, "labels", ("metadata",))


def pod_parts(obj: Mapping[str, Any], location: PodTemplateLocation) -> PodParts:
    metadata = _resolve(obj, location.metadata)
    annotations = _mapping(metadata, "annotations", location.metadata)
    if annotations and annotation_bytes(annotations) > MAX_ANNOTATION_BYTES:
        # The apiserver's own limit and words: such an object is never stored anyway.
        raise MalformedObject(
            (*location.metadata, "annotations"),
            f"Too long: must have at most {MAX_ANNOTATION_BYTES} bytes",
        )
    return PodParts(
        metadata, annotations, _resolve(obj, location.spec), _top_owner_labels(obj, location)
    )


def annotation_bytes(annotations: Mapping[str, Any]) -> int:
    """The bytes the apiserver counts against its limit: keys and string values, in UTF-8. A
    lone surrogate (JSON allows the escape `\\ud800`) counts the three bytes it is written in."""
    chars = sum(
        len(key) + (len(value) if type(value) is str else 0) for key, value in annotations.items()
    )
    if chars * 4 <= MAX_ANNOTATION_BYTES:
        return chars  # UTF-8 takes at most four bytes a character
    return sum(
        len(key.encode(errors="surrogatepass"))
        + (len(value.encode(errors="surrogatepass")) if type(value) is str else 0)
        for key, value in annotations.items()
    )


def engine_input(
    location: PodTemplateLocation, parts: PodParts, gives_labels: bool = False
) -> str | None:
    """Everything the engine reads of a pod, as one JSON text: pods with the same text get the
    same outcome. Made from the parts as sent, before a `PodView` is read from them (a pod whose
    text is known needs none), so a part of the wrong type is written as it is and a pod that
    holds one gets a text of its own. None when a part is no JSON value (a date read from YAML)
    or the containers are no list of objects: such a pod is judged afresh.

    The engine reads an absent, a null and an empty map alike, but patches each differently,
    so the text holds each part as it was sent, or that it was not. Of the labels, only those
    a backend gives are in it (pods that differ in others, as the pods of a ReplicaSet do,
    share a text), and whether there is a map to add one to where the governing policy gives
    one (`gives_labels`)."""
    metadata, _, spec, owner_labels = parts
    try:
        containers = [
            (
                kind,
                raw.get("name"),
                _sent(raw, "resources"),
                _sent(raw, "env"),
                _sent(raw, "restartPolicy"),
                _sent(raw, "securityContext"),
            )
            for kind in CONTAINER_LISTS
            for raw in _sent_list(spec, kind)
        ]
        return _encode_compact(
            [
                metadata is _NOTHING,
                _sent(metadata, "annotations"),
                _labels_read(metadata, gives_labels),
                None if owner_labels is None else _labels_read({"labels": owner_labels}, False),
                containers,
                _sent(spec, "nodeSelector"),
                _sent(spec, "tolerations"),
                _sent(spec, "affinity"),
                _sent(spec, "runtimeClassName"),
                _sent(spec, "schedulerName"),
                _sent(spec, "nodeName"),
                _sent(spec, "resourceClaims"),
            ]
        )
    except (AttributeError, TypeError, ValueError):
        return None


def metadata_sent(obj: Mapping[str, Any], location: PodTemplateLocation) -> str:
    """How each step down to the pod's metadata was sent: a dict (d), null (n), absent (a) or
    another value (v). The engine reads absent and null alike, but patches them apart."""
    marks = []
    node: Any = obj
    for key in location.metadata:
        if type(node) is not dict or key not in node:
            marks.append("a")
            break
        node = node[key]
        marks.append("d" if type(node) is dict else "n" if node is None else "v")
        if type(node) is not dict:
            break
    return "".join(marks)


def _sent(node: Mapping[str, Any], key: str) -> tuple[Any, ...]:
    """The value at `key` as a one-item tuple, or () where there is none: in JSON, an absent
    part then differs from every value it could hold (0 and null among them)."""
    return (node[key],) if key in node else ()


def _labels_read(metadata: Mapping[str, Any], gives_labels: bool) -> tuple[Any, ...]:
    """The labels a backend gives, as sent, and whether the map is there to add one to."""
    labels = metadata.get("labels")
    if "labels" in metadata and type(labels) is not dict:
        return (labels,)
    found = labels or {}
    held = [_sent(found, key) for key in BACKEND_LABELS]
    return ("labels" in metadata, held) if gives_labels else (held,)


def _sent_list(spec: Mapping[str, Any], key: str) -> list[Any]:
    found = spec.get(key)
    if found is None:
        return []
    if type(found) is not list:
        raise TypeError(key)
    return found


def _read_containers(spec: Mapping[str, Any], spec_path: Path) -> tuple[Container, ...]:
    containers: list[Container] = []
    lists = [(kind, _list(spec, kind, spec_path)) for kind in CONTAINER_LISTS]
    count = sum(len(found) for _, found in lists)
    if count > MAX_CONTAINERS:
        raise MalformedObject(
            (*spec_path, "containers"),
            f"{count} containers and init containers: at most {MAX_CONTAINERS} are admitted",
        )
    for kind, found in lists:
        for index, raw in enumerate(found):
            # Type tests first, and the paths for a message only when one fails: every pod
            # passes here.
            if type(raw) is not dict or type(raw.get("name")) is not str:
                _refuse_container((*spec_path, kind, index), raw)
            resources = raw.get("resources")
            limits: Mapping[str, Any]
            requests: Mapping[str, Any]
            if resources is None:
                limits = requests = _NOTHING
            else:
                if type(resources) is not dict:
                    resources = _mapping(raw, "resources", (*spec_path, kind, index))
                limits = resources.get("limits", _NOTHING)
                requests = resources.get("requests", _NOTHING)
                if type(limits) is not dict or type(requests) is not dict:
                    resources_path = (*spec_path, kind, index, "resources")
                    limits = _mapping(resources, "limits", resources_path)
                    requests = _mapping(resources, "requests", resources_path)
            containers.append(Container(kind, index, raw["name"], spec_path, raw, limits, requests))
    if len({container.name for container in containers}) < len(containers):
        _refuse_duplicate_names(containers)
    return tuple(containers)


def _refuse_duplicate_names(containers: list[Container]) -> NoReturn:
    """A pod's containers and init containers share one namespace of names, which the
    engine's record and patches rely on: the apiserver refuses duplicates too, after us."""
    first: dict[str, Container] = {}
    for container in containers:
        earlier = first.setdefault(container.name, container)
        if earlier is not container:
            raise MalformedObject(
                (*container.path, "name"),
                f'Duplicate value: "{container.name}" (also {format_field(earlier.path)}): '
                "give each container and init container a name of its own",
            )
    raise AssertionError("no duplicate found")


def _refuse_container(path: Path, raw: Any) -> NoReturn:
    if not isinstance(raw, dict):
        raise MalformedObject(path, f"must be an object, not {_json_type(raw)}")
    raise MalformedObject((*path, "name"), "must be a string")


def pod_labels(obj: Mapping[str, Any], location: PodTemplateLocation) -> Mapping[str, str]:
    """The labels of the pod, or of the pod template: the ones a pod created from the
    template will carry, so that a workload and its pods are judged by the same policy."""
    return labels_in(_resolve(obj, location.metadata), location)


def labels_in(metadata: Mapping[str, Any], location: PodTemplateLocation) -> Mapping[str, str]:
    """`pod_labels`, from the metadata `pod_parts` found."""
    path = (*location.metadata, "labels")
    labels = _mapping(metadata, "labels", location.metadata)
    for key, value in labels.items():
        if not isinstance(value, str):
            raise MalformedObject((*path, key), f"must be a string, not {_json_type(value)}")
    return labels
