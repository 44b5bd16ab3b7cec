"""Hypothesis strategies for the bodies a webhook may be sent, from bytes that are no JSON at
all, through reviews whose request or object is any JSON, to near-valid pods and workloads of
every kind the engine reads, perturbed: quantities of every type and spelling, the fraction
annotations and the shares record, unicode and huge names, nesting around and far beyond the
100 levels the webhook reads, up to thousands of containers, duplicate names, null anywhere.

A case also says which policy set judges it and, sometimes, a sibling review to judge first:
the same pod with one empty part spelled otherwise (absent, null, empty), which the engine
reads alike and the outcome cache must still tell apart.

Large things (many containers, long names, deep nesting, bodies over 8 MiB) are made by
repeating a drawn piece, not by drawing every character, so that an example stays cheap.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hypothesis import strategies as st

from webhook.admission.input_bounds import MAX_NESTING_DEPTH
from webhook.engine.pod_spec import MAX_ANNOTATION_BYTES, MAX_CONTAINERS
from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS, PodTemplateLocation
from webhook.policy.defaults import (
    FRACTION_ANNOTATION,
    FRACTION_CONTAINER_ANNOTATION,
    POLICY_ANNOTATION,
    SHARES_ANNOTATION,
)
from webhook.server.settings import MAX_BODY_BYTES

REPO_ROOT = Path(__file__).resolve().parents[2]
# The policy sets a case may be judged by: the shipped one, and those the scenario groups bring
# (sharing with enforced env and a placement, a RuntimeClass, GiB units and one model, whole
# GPUs only, and several policies chosen by namespace and namespace labels).
POLICY_DIRS: dict[str, Path] = {
    name: path
    for name, path in {
        "shipped": REPO_ROOT / "policies",
        "strict": REPO_ROOT / "tests" / "scenarios" / "strict" / "policies",
        "runtime-class": REPO_ROOT / "tests" / "scenarios" / "runtime-class" / "policies",
        "single-model-gib": REPO_ROOT / "tests" / "scenarios" / "single-model-gib" / "policies",
        "whole-only": REPO_ROOT / "tests" / "scenarios" / "whole-only" / "policies",
        "teams": REPO_ROOT / "tests" / "scenarios" / "teams" / "policies",
        "dra": REPO_ROOT / "tests" / "scenarios" / "dra" / "policies",
    }.items()
    if path.is_dir()
}
# The namespace labels the in-process judge knows (the teams policies select by them); every
# other namespace's labels are unknown.
NAMESPACE_LABELS: dict[str, dict[str, str]] = {"fuzz-opted-in": {"gpu-sharing": "enabled"}}

Endpoint = Literal["mutate", "validate"]
API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
_ABSENT: Any = object()  # a member left out, where a strategy may also give None


@dataclass(frozen=True)
class Case:
    """One body to send, where, judged by which policy set; `warmup`, when set, is a sibling
    review judged first, by the same judge."""

    family: str
    body: bytes
    endpoint: Endpoint = "mutate"
    policies: str = "shipped"
    content_type: str = "application/json"
    warmup: bytes | None = None

    def __repr__(self) -> str:
        shown = _preview(self.body)
        warmup = "" if self.warmup is None else f", warmup={_preview(self.warmup)}"
        return (
            f"Case(family={self.family!r}, endpoint={self.endpoint!r}, "
            f"policies={self.policies!r}, content_type={self.content_type!r}, "
            f"body={shown}{warmup})"
        )


_PICKS: dict[str, st.SearchStrategy[Any]] = {}
_EITHERS: dict[tuple[int, ...], st.SearchStrategy[Any]] = {}


def pick(*values: Any) -> st.SearchStrategy[Any]:
    """st.sampled_from(values), made once: a strategy made anew at every draw is validated
    anew, which costs more than the draw."""
    key = repr(values)
    found = _PICKS.get(key)
    if found is None:
        found = _PICKS[key] = st.sampled_from(values)
    return found


def either(*strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """st.one_of(strategies), made once for the same strategies."""
    key = tuple(id(strategy) for strategy in strategies)
    found = _EITHERS.get(key)
    if found is None:
        found = _EITHERS[key] = st.one_of(*strategies)
    return found


def _preview(body: bytes, limit: int = 3000) -> str:
    if len(body) <= limit:
        return repr(body)
    return f"{body[:limit]!r}... ({len(body)} bytes)"


# --- JSON values -----------------------------------------------------------------------------


def texts(max_size: int = 8, min_size: int = 0) -> st.SearchStrategy[str]:
    """Any text, lone surrogates and control characters included."""
    return st.text(st.characters(exclude_categories=()), min_size=min_size, max_size=max_size)


def stretched(piece: st.SearchStrategy[str], times: Sequence[int]) -> st.SearchStrategy[str]:
    """A drawn piece repeated: a long text for the price of a short one."""
    return st.builds(lambda text, n: (text or "x") * n, piece, st.sampled_from(times))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(),
    texts(),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts(6), inner, max_size=4),
    max_leaves=10,
)

# --- quantities ------------------------------------------------------------------------------

_SIGNS = ["", "", "", "+", "-"]
_NUMBERS = [
    "0", "1", "2", "8", "0.5", ".5", "0.25", "0.125", "0.75", "0.999", "1.", "0.0", "00.50",
    "1.5", "333", "250", "500", "999", "1000", "3840", "0.0000001", "16384",
    "123456789012345678901234567890", "1" * 64, "0." + "0" * 40 + "1",
]  # fmt: skip
_SUFFIXES = [
    "", "", "", "m", "m", "n", "u", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti",
    "Pi", "Ei", "e3", "E3", "e-3", "e+2", "e0", "e30", "e31", "e-30", "e-31", "E-1", "i",
    "K", "mi", "e", "MiB", "m ",
]  # fmt: skip
_ODD_QUANTITIES = [
    "", " 1", "1 ", "0x10", "\u0661", "\uff12", "NaN", "Infinity", "-Infinity", "-", "+", ".",
    "e3", "1m1", "\u00bd", "1_000", "0.25\n", "1e", "--1", "+-1", "0.5.5", "1,5", "25%",
]  # fmt: skip

quantity_strings = st.one_of(
    st.builds(
        lambda sign, number, suffix: sign + number + suffix,
        pick(*_SIGNS),
        pick(*_NUMBERS),
        pick(*_SUFFIXES),
    ),
    st.integers(min_value=1, max_value=999).map(lambda n: f"{n}m"),
    st.integers(min_value=0, max_value=20000).map(str),
    pick(*_ODD_QUANTITIES),
    texts(6),
)
quantity_numbers = st.one_of(
    pick(0, 1, 2, 8, -1, 0.25, 0.5, 0.75, 1.5, 1.0, -0.0, 1e-300, 5e-324, 1e300),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=10**4298, max_value=10**4299),
    st.floats(),
)
quantities = st.one_of(
    quantity_strings,
    quantity_strings,
    quantity_strings,
    quantity_numbers,
    st.sampled_from([None, True, False, [], {}, ["1"], {"value": "1"}, [0.5]]),
    json_values,
)

# --- names -----------------------------------------------------------------------------------

_NAMES = [
    "c0", "c1", "main", "sidecar", "init", "a", "", "\u00fc", "a/b", "~0~1", "\u540d\u524d",
    "x" * 253, "\x00", "c0 ", "C0", "\ud800", '"', "\\", "\U0001f600",
]  # fmt: skip
_LONG_NAMES = stretched(texts(3, min_size=1), [300, 5000, 20000])
names = st.one_of(*[pick(*_NAMES)] * 8, *[texts(12)] * 4, _LONG_NAMES)
NAMESPACES = [
    "ml", "default", "kube-system", "payments", "ml-team", "fuzz-opted-in", "", "\u00e9t\u00e9",
    "a" * 63, "KUBE-SYSTEM",
]  # fmt: skip
namespaces = st.one_of(pick(*NAMESPACES), texts(10))
uids = st.one_of(
    *[st.uuids().map(str)] * 8,
    *[texts(12, min_size=1)] * 4,
    pick('"', "\\", "\ud83d", "\x00", "</script>", "uid\nwith\nlines"),
    stretched(texts(3, min_size=1), [10000, 30000]),
)

# --- resources, env, placement ---------------------------------------------------------------
#
# A pod is drawn `rough` (a third of the time) or not. A rough pod may hold a value of any type
# wherever one goes, and quantities in any spelling or none; the others hold only what the
# apiserver would send, so that they get as far as a patch, where the properties have most
# to check.

GPU_RESOURCES = [
    "nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "nvidia.com/mig-1g.5gb",
    "nvidia.com/mig-3g.20gb", "nvidia.com/mig-*",
]  # fmt: skip
VRAM_RESOURCES = ["example.com/vram", "example.com/vram-gib"]
OTHER_RESOURCES = [
    "cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "example.org/widget",
    "kubernetes.io/gpu", "requests.nvidia.com/gpu", "NVIDIA.com/gpu", "nvidia.com/gpu ",
    "nvidia.com~1gpu", "a~b/c/d", "", "nvidia.com/mig-\u00e9",
]  # fmt: skip
rough_resource_names = st.one_of(
    pick(*GPU_RESOURCES[:1] * 4, *GPU_RESOURCES),
    pick(*VRAM_RESOURCES),
    pick(*OTHER_RESOURCES),
    texts(10),
)
resource_names = pick(
    *["nvidia.com/gpu"] * 10, *GPU_RESOURCES, *VRAM_RESOURCES, "cpu", "memory",
    "example.org/widget",
)  # fmt: skip
# Amounts as a manifest or the apiserver writes them: mostly shares of a GPU.
amounts = st.one_of(
    pick(
        "250m", "500m", "0.5", "0.25", ".5", "0.125", "125m", "333m", "0.75", "900m", "1", "2",
        "8", "0", "-1", "1.5", "+1", "1e0", "1000m", "2500m", "0.0001", "1n", "1Ki", "0.5e0",
        "5e-1", "3840", "16384", "7680",
    ),
    pick(0.5, 0.25, 1, 2, 0, 0.125, 1.0),
    st.integers(min_value=1, max_value=999).map(lambda n: f"{n}m"),
)  # fmt: skip
MODELS = [
    "Tesla-T4", "NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3",
    "NVIDIA-L4", "NVIDIA-A10", "Unknown-GPU", "",
]  # fmt: skip
MODEL_LABEL = "nvidia.com/gpu.product"
ENV_NAMES = [
    "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION", "TF_FORCE_GPU_ALLOW_GROWTH",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "NVIDIA_VISIBLE_DEVICES", "GPU_SHARE", "PATH", "",
]  # fmt: skip
ENV_VALUES = [
    "0.25", "0.5", "0.9", "0.2499", "true", "0=3840M", "0=7680M", "25", "50", "all", "",
    "3840 MiB of Tesla-T4 (4026531840 bytes)",
]  # fmt: skip
_SHAPES = pick("limits", "limits", "limits", "both", "both", "requests", "other")
_SHARES = pick(
    "250m", "500m", "0.5", "0.25", ".5", "125m", "0.75", "1", "2", "1000m", "5e-1", 0.5, 0.25, 1
)  # fmt: skip


def _gpu_resources(amount: Any, in_requests: bool, with_cpu: bool) -> dict[str, Any]:
    limits: dict[str, Any] = {"nvidia.com/gpu": amount}
    if with_cpu:
        limits["cpu"] = "1"
    if not in_requests:
        return {"limits": limits}
    return {"limits": limits, "requests": {"nvidia.com/gpu": amount, "memory": "1Gi"}}


# What most GPU containers ask for: a share or a few whole GPUs, in limits (and requests).
gpu_resources = st.builds(_gpu_resources, _SHARES, st.booleans(), st.booleans())


@st.composite
def resources(draw: st.DrawFn, rough: bool) -> Any:
    if not rough and draw(st.integers(0, 2)):
        return draw(gpu_resources)
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    chosen = rough_resource_names if rough else resource_names
    values = quantities if rough else amounts
    for name in draw(st.lists(chosen, min_size=not rough, max_size=3, unique=True)):
        value = draw(values)
        shape = draw(_SHAPES)
        if shape != "requests":
            limits[name] = value
        if shape in ("both", "requests"):
            requests[name] = value
        if shape == "other":
            requests[name] = draw(values)
    result: dict[str, Any] = {}
    if limits:
        result["limits"] = limits
    if requests:
        result["requests"] = requests
    if rough and draw(st.integers(0, 15)) == 0:
        result[draw(pick("limits", "requests"))] = draw(json_values)
    if rough and draw(st.integers(0, 20)) == 0:
        return draw(json_values)
    return result


env_items = st.one_of(
    st.builds(
        lambda name, value: {"name": name, "value": value},
        pick(*ENV_NAMES),
        either(pick(*ENV_VALUES), texts(6)),
    ),
    st.builds(
        lambda name: {"name": name, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        pick(*ENV_NAMES),
    ),
    st.builds(lambda name: {"name": name}, pick(*ENV_NAMES)),
)
envs = st.lists(env_items, max_size=4)
rough_envs = st.one_of(st.lists(st.one_of(env_items, json_values), max_size=4), json_values)

_TOLERATIONS = [
    {"key": "example.com/vram", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "example.com/vram", "operator": "Exists"},
    {"operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "example.com/vram", "operator": "Equal", "value": "", "effect": "NoSchedule"},
    {"key": "gpu-admission.example.com/shared", "operator": "Exists"},
    {"key": "example.com/vram", "operator": "Exists", "tolerationSeconds": 30},
]
_ODD_TOLERATIONS = [
    {"key": "example.com/vram", "operator": "Exists", "tolerationSeconds": 1.5},
    {"key": "example.com/vram", "operator": "Exists", "tolerationSeconds": True},
    {"key": 7, "operator": "Exists"},
    {"key": None, "operator": None, "effect": None},
]
tolerations = st.lists(pick(*_TOLERATIONS), max_size=3)
rough_tolerations = st.one_of(
    st.lists(st.one_of(pick(*_TOLERATIONS, *_ODD_TOLERATIONS), json_values), max_size=3),
    json_values,
)
_MODEL_LISTS = st.lists(pick(*MODELS), max_size=3)


@st.composite
def affinities(draw: st.DrawFn, rough: bool) -> Any:
    expressions = []
    for _ in range(draw(st.integers(0, 3))):
        expression: dict[str, Any] = {
            "key": draw(pick(MODEL_LABEL, MODEL_LABEL, "kubernetes.io/hostname")),
            "operator": draw(pick("In", "NotIn", "Exists", "DoesNotExist", "Gt")),
        }
        if draw(st.booleans()):
            values = either(_MODEL_LISTS, json_values) if rough else _MODEL_LISTS
            expression["values"] = draw(values)
        expressions.append(expression)
    terms: Any = [{"matchExpressions": expressions}]
    if rough and draw(st.integers(0, 3)) == 0:
        terms.append(draw(either(pick({}, {"matchExpressions": None}), json_values)))
    required: Any = {"nodeSelectorTerms": terms}
    if rough and draw(st.integers(0, 10)) == 0:
        required = draw(json_values)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


@st.composite
def node_selectors(draw: st.DrawFn, rough: bool) -> Any:
    selector: dict[str, Any] = {}
    if draw(st.booleans()):
        models = either(pick(*MODELS), json_values) if rough else pick(*MODELS)
        selector[MODEL_LABEL] = draw(models)
    if draw(st.booleans()):
        key = draw(pick("gpu-admission.example.com/sharing", "gpu-pool"))
        selector[key] = draw(pick("memory", "whole", "production"))
    if rough and draw(st.integers(0, 10)) == 0:
        return draw(json_values)
    return selector


# --- containers and pods ---------------------------------------------------------------------


# DRA claims as the webhook names them (and others): a pod's entries and a container's uses.
_CLAIM_NAMES = pick("gpu-share-c0", "gpu-share-c1", "gpu-share-i0", "mine")
_TEMPLATE_NAMES = pick("gpu-share-17971mi-abc", "gpu-share-3840mi-x", "theirs")
_POD_CLAIMS = st.fixed_dictionaries(
    {"name": _CLAIM_NAMES}, optional={"resourceClaimTemplateName": _TEMPLATE_NAMES}
)


@st.composite
def containers(draw: st.DrawFn, name: Any, rough: bool) -> Any:
    container: dict[str, Any] = {"name": name, "image": "cuda:12"}
    if draw(st.integers(0, 5)):
        container["resources"] = draw(resources(rough))
    if draw(st.integers(0, 2)) == 0:
        container["env"] = draw(rough_envs if rough else envs)
    if draw(st.integers(0, 8)) == 0:
        container["restartPolicy"] = "Always"  # a sidecar
    if draw(st.integers(0, 6)) == 0 and isinstance(container.get("resources"), dict):
        claims = st.lists(st.fixed_dictionaries({"name": _CLAIM_NAMES}), max_size=2)
        container["resources"]["claims"] = draw(either(claims, json_values) if rough else claims)
    if rough and draw(st.integers(0, 30)) == 0:
        return draw(json_values)
    return container


# Counts that cross the engine's bound on containers, or go far beyond it.
_MANY = [20, 100, MAX_CONTAINERS - 1, MAX_CONTAINERS, MAX_CONTAINERS + 1, 1000, 3000]


@st.composite
def container_lists(draw: st.DrawFn, prefix: str, most: int, rough: bool) -> list[Any]:
    if draw(st.integers(0, 15)) == 0:
        count = draw(pick(*_MANY))
    else:
        count = draw(either(st.integers(0, most), *[st.integers(1, most)] * 3))
    if count <= 4:
        chosen = []
        for index in range(count):
            name = draw(names) if draw(st.integers(0, 4)) == 0 else f"{prefix}{index}"
            chosen.append(draw(containers(name, rough)))
        return chosen
    # Many containers: copies of one or two drawn containers, named one by one, perhaps with
    # a name given twice.
    kinds = [draw(containers(f"{prefix}0", rough)) for _ in range(draw(st.integers(1, 2)))]
    result = []
    for index in range(count):
        copied = copy.deepcopy(kinds[index % len(kinds)])
        if isinstance(copied, dict):
            copied["name"] = f"{prefix}{index}"
        result.append(copied)
    if draw(st.integers(0, 3)) == 0 and isinstance(result[-1], dict):
        result[-1]["name"] = f"{prefix}0"
    return result


def container_names(spec: Any) -> list[str]:
    found = []
    for kind in ("initContainers", "containers"):
        listed = spec.get(kind) if isinstance(spec, dict) else None
        for container in listed if isinstance(listed, list) else []:
            if isinstance(container, dict) and isinstance(container.get("name"), str):
                found.append(container["name"])
    return found


@st.composite
def pod_specs(draw: st.DrawFn, rough: bool) -> Any:
    spec: dict[str, Any] = {"containers": draw(container_lists("c", 3, rough))}
    if draw(st.integers(0, 2)) == 0:
        spec["initContainers"] = draw(container_lists("i", 2, rough))
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(node_selectors(rough))
    if draw(st.integers(0, 2)) == 0:
        spec["tolerations"] = draw(rough_tolerations if rough else tolerations)
    if draw(st.integers(0, 3)) == 0:
        spec["affinity"] = draw(affinities(rough))
    if draw(st.integers(0, 5)) == 0:
        entries = st.lists(_POD_CLAIMS, max_size=2)
        spec["resourceClaims"] = draw(either(entries, json_values) if rough else entries)
    if draw(st.integers(0, 4)) == 0:
        classes = pick("nvidia", "other", "")
        spec["runtimeClassName"] = draw(either(classes, json_values) if rough else classes)
    if rough and draw(st.integers(0, 30)) == 0:
        return draw(json_values)
    return spec


@st.composite
def share_records(draw: st.DrawFn, known_names: Sequence[str], rough: bool) -> Any:
    forms = ["record"] * 6 + (["json", "text", "deep", "huge", "other"] if rough else ["json"])
    form = draw(pick(*forms))
    if form == "record":
        record: dict[str, Any] = {
            "model": draw(pick(*MODELS, None, 7)),
            "pinned": draw(either(st.booleans(), json_values) if rough else st.booleans()),
        }
        chosen = (
            draw(st.lists(st.sampled_from(tuple(known_names)), unique=True)) if known_names else []
        )
        record["containers"] = {
            name: {
                "asked": draw(pick("nvidia.com/gpu=250m", "gpu-fraction=0.5", "")),
                "vram": draw(pick("3840", "7680", "1", "0", "x", "0.5", "10")),
                "env": draw(st.lists(pick(*ENV_NAMES), max_size=3)),
                **(
                    {
                        "mib": draw(pick("17971", "3840", "0", "x")),
                        "claim": f"gpu-share-{name}",
                        "template": draw(_TEMPLATE_NAMES),
                    }
                    if draw(st.integers(0, 3)) == 0
                    else {}
                ),
            }
            for name in chosen
        }
        if draw(st.integers(0, 3)) == 0:
            record["runtimeClassName"] = draw(pick("nvidia", "other", None))
        if rough and draw(st.integers(0, 10)) == 0:
            record[draw(st.sampled_from(tuple(record)))] = draw(json_values)
        return json.dumps(record, separators=(",", ":"))
    if form == "json":
        return json.dumps(draw(json_values))
    if form == "text":
        return draw(texts(20))
    if form == "deep":
        depth = draw(pick(99, 100, 1000, 5000))
        return '{"containers":' + "[" * depth + "]" * depth + "}"
    if form == "huge":
        return json.dumps({"model": "x" * (256 * 1024 + 1), "containers": {}})
    return draw(json_values)


_LABELS = st.dictionaries(either(pick("app", "team", "a/b"), texts(5)), texts(5), max_size=3)
_ROUGH_LABELS = st.one_of(_LABELS, json_values)
_FRACTIONS = pick("0.5", "0.25", "1.5", "0", "1", "250m", "0.3", "1e-1", ".5", "-0.5")
_ROUGH_FRACTIONS = st.one_of(_FRACTIONS, quantities)


@st.composite
def pod_metadata(draw: st.DrawFn, known_names: Sequence[str], rough: bool) -> Any:
    metadata: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        return metadata
    if draw(st.booleans()):
        metadata["labels"] = draw(_ROUGH_LABELS if rough else _LABELS)
    annotations: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        annotations[FRACTION_ANNOTATION] = draw(_ROUGH_FRACTIONS if rough else _FRACTIONS)
    if draw(st.integers(0, 3)) == 0:
        if known_names and draw(st.integers(0, 2)):
            annotations[FRACTION_CONTAINER_ANNOTATION] = draw(st.sampled_from(tuple(known_names)))
        else:
            annotations[FRACTION_CONTAINER_ANNOTATION] = draw(
                either(names, json_values) if rough else names
            )
    if draw(st.integers(0, 2)) == 0:
        annotations[SHARES_ANNOTATION] = draw(share_records(known_names, rough))
    if draw(st.integers(0, 6)) == 0:
        policies = pick("default", "other")
        annotations[POLICY_ANNOTATION] = draw(either(policies, json_values) if rough else policies)
    if draw(st.integers(0, 40)) == 0:
        # Around the apiserver's limit on annotations, in bytes: UTF-8 of two bytes a character
        # or one.
        size = MAX_ANNOTATION_BYTES + draw(pick(-200, -5, 0, 5, 200))
        letter = draw(pick("x", "\u00e9"))
        annotations["note"] = letter * (size // len(letter.encode()))
    if rough and draw(st.integers(0, 6)) == 0:
        annotations.update(draw(st.dictionaries(texts(6), json_values, max_size=3)))
    if annotations:
        metadata["annotations"] = annotations
    if rough and draw(st.integers(0, 25)) == 0:
        metadata["annotations"] = draw(json_values)
    return metadata


# --- reviews ---------------------------------------------------------------------------------

WORKLOAD_KINDS: list[tuple[tuple[str, str], PodTemplateLocation]] = sorted(
    POD_TEMPLATE_LOCATIONS.items()
)
OTHER_KINDS = [("", "Service"), ("apps", "Pod"), ("", "Deployment"), ("batch", "Pod"), ("", "")]
OPERATIONS = ["CREATE"] * 7 + ["UPDATE"] * 3 + ["DELETE", "CONNECT"]


def put_at(root: dict[str, Any], path: Sequence[Any], value: Any) -> None:
    node = root
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


def at(root: Any, path: Sequence[Any]) -> Any:
    node = root
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


@st.composite
def workload_objects(draw: st.DrawFn, location: PodTemplateLocation, kind: str, rough: bool) -> Any:
    spec = draw(pod_specs(rough))
    metadata = draw(pod_metadata(container_names(spec), rough))
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "fuzz"}}
    if location.is_pod:
        if isinstance(metadata, dict) and draw(st.integers(0, 2)) == 0:
            metadata = {"name": "fuzz", **metadata}
        obj["metadata"] = metadata
        obj["spec"] = spec
    else:
        put_at(obj, location.metadata, metadata)
        put_at(obj, location.spec, spec)
    return obj


@st.composite
def workload_reviews(draw: st.DrawFn, rough: bool | None = None) -> dict[str, Any]:
    if rough is None:
        rough = draw(st.integers(0, 2)) == 0
    (group, kind), location = draw(pick(*WORKLOAD_KINDS))
    obj = draw(workload_objects(location, kind, rough))
    operation = draw(pick(*OPERATIONS))
    request: dict[str, Any] = {
        "uid": draw(uids),
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": draw(namespaces),
        "name": draw(either(pick("fuzz"), names)),
        "object": obj,
        "userInfo": {"username": "fuzz"},
    }
    if operation == "UPDATE":
        old = draw(pick("same", "other", "relabelled", "none", "json"))
        if old == "same":
            request["oldObject"] = copy.deepcopy(obj)
        elif old == "other":
            request["oldObject"] = draw(workload_objects(location, kind, rough))
        elif old == "relabelled":
            request["oldObject"] = dict(copy.deepcopy(obj), metadata={"labels": {"v": "1"}})
        elif old == "json":
            request["oldObject"] = draw(json_values)
    elif operation == "DELETE":
        request["oldObject"], request["object"] = obj, None
    if draw(st.integers(0, 20)) == 0:
        request["subResource"] = draw(pick("status", "", None, "scale"))
    if draw(st.booleans()):
        request["dryRun"] = draw(either(st.booleans(), json_values) if rough else st.booleans())
    return {"apiVersion": draw(pick(*API_VERSIONS)), "kind": "AdmissionReview",
            "request": request}  # fmt: skip


@st.composite
def member(draw: st.DrawFn, usual: st.SearchStrategy[Any], rate: int = 4) -> Any:
    """Mostly a usual value; sometimes absent, null or any JSON."""
    if draw(st.integers(0, rate)):
        return draw(usual)
    return draw(either(pick(_ABSENT, None), json_values))


def _members(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not _ABSENT}


@st.composite
def request_reviews(draw: st.DrawFn) -> dict[str, Any]:
    """A review whose envelope reads, with a request whose members may be anything."""
    group, kind = draw(st.sampled_from([key for key, _ in WORKLOAD_KINDS] + OTHER_KINDS))
    kinds = st.one_of(
        st.just({"group": group, "version": "v1", "kind": kind}),
        st.builds(
            lambda g, v, k: _members(group=g, version=v, kind=k),
            member(st.just(group)),
            member(st.just("v1")),
            member(st.just(kind)),
        ),
    )
    objects = st.one_of(
        json_values,
        pick(*WORKLOAD_KINDS).flatmap(lambda pair: workload_objects(pair[1], kind, True)),
    )
    request = _members(
        uid=draw(uids),
        kind=draw(member(kinds)),
        operation=draw(member(pick(*OPERATIONS, "create", ""))),
        subResource=draw(member(pick("", "status"), rate=2)),
        namespace=draw(member(namespaces)),
        name=draw(member(names)),
        object=draw(member(objects)),
        oldObject=draw(member(objects, rate=1)),
        dryRun=draw(member(st.booleans())),
    )
    if draw(st.integers(0, 4)) == 0:
        request.update(draw(st.dictionaries(texts(6), json_values, max_size=3)))
        request["uid"] = draw(uids)
    return {"apiVersion": draw(pick(*API_VERSIONS)), "kind": "AdmissionReview",
            "request": request}  # fmt: skip


@st.composite
def envelope_reviews(draw: st.DrawFn) -> Any:
    """Reviews whose envelope may not read: kind, apiVersion, request and uid of any shape."""
    kinds = st.sampled_from(["AdmissionReview"] * 5 + ["admissionreview", "AdmissionReviewList"])
    versions = pick(*API_VERSIONS, *API_VERSIONS, "admission.k8s.io/v2", "v1", "")
    request = draw(
        member(
            st.builds(
                lambda uid, extra: _members(uid=uid, **extra),
                member(uids, rate=2),
                st.dictionaries(pick("kind", "operation", "object"), json_values),
            ),
            rate=2,
        )
    )
    review = _members(
        kind=draw(member(kinds, rate=3)),
        apiVersion=draw(member(versions, rate=3)),
        request=request,
    )
    if draw(st.integers(0, 4)) == 0:
        review.update(draw(st.dictionaries(texts(8), json_values, max_size=3)))
    return review


# --- perturbations ---------------------------------------------------------------------------


def fresh(document: Any) -> Any:
    """A copy of a drawn document that may be changed in place: strategies hand out the same
    objects again (a sampled toleration, an empty map)."""
    try:
        return json.loads(json.dumps(document))
    except (ValueError, RecursionError):
        return copy.deepcopy(document)


def _children(node: Any) -> Sequence[Any]:
    if isinstance(node, dict):
        return list(node)
    if isinstance(node, list):
        return range(len(node))
    return ()


def _walk(draw: st.DrawFn, root: Any) -> tuple[Any, Any, int] | None:
    """A random place below `root` (a container): its parent, its key or index, and the
    parent's depth (root: 1)."""
    node, parent, key, depth = root, None, None, 0
    while True:
        children = _children(node)
        if not children or (parent is not None and draw(st.integers(0, 3)) == 0):
            break
        parent, depth = node, depth + 1
        if isinstance(children, range):
            key = draw(st.integers(0, len(children) - 1))
        else:
            key = draw(st.sampled_from(children))
        node = node[key]
    return None if parent is None else (parent, key, depth)


_DEEP = "@@fuzz-deep-{}@@"
_DEEP_TEXT = re.compile(r'"@@fuzz-deep-(\d+)@@"')
# Total depths (the request's object counts 1) around the webhook's bound, and far past what
# Python's decoder reads.
_DEPTHS = [
    MAX_NESTING_DEPTH - 2, MAX_NESTING_DEPTH - 1, MAX_NESTING_DEPTH, MAX_NESTING_DEPTH + 1,
    MAX_NESTING_DEPTH + 2, 150, 500, 990, 1010, 3000, 100000,
]  # fmt: skip


def nested(levels: int, leaf: Any = 1) -> Any:
    """`levels` of arrays and objects, taking turns, around `leaf`; past a few hundred, a
    marker that the body's text replaces with as many brackets (json.dumps would recurse)."""
    if levels > 300:
        return _DEEP.format(levels)
    value = leaf
    for level in range(levels):
        value = [value] if level % 2 else {"a": value}
    return value


@st.composite
def perturbed(draw: st.DrawFn, review: Any, start: Sequence[Any] = ("request",)) -> Any:
    """`review` with a few places below `start` replaced: by null, by any JSON, by a quantity,
    removed, or nested around and beyond the webhook's depth bound."""
    base = at(review, start)
    if not isinstance(base, (dict, list)):
        return review
    for _ in range(draw(st.integers(0, 3) | st.just(0))):
        place = _walk(draw, base)
        if place is None:
            break
        parent, key, depth = place
        action = draw(pick("null", "null", "json", "quantity", "remove", "deep", "wrap"))
        if action == "null":
            parent[key] = None
        elif action == "json":
            parent[key] = draw(json_values)
        elif action == "quantity":
            parent[key] = fresh(draw(quantities))  # a sampled value is shared: copied
        elif action == "remove":
            del parent[key]
        elif action == "deep":
            target = draw(pick(*_DEPTHS))
            # The request is at depth 1; `base` at len(start); the parent `depth` below it.
            parent_depth = len(start) + depth - 1
            parent[key] = nested(max(1, target - parent_depth))
        else:
            parent[key] = [parent[key]]
    return review


# --- empty parts, spelled otherwise ----------------------------------------------------------

_ABSENT_PART, _NULL_PART, _EMPTY_PART = "absent", "null", "empty"


def optional_parts(obj: Any, location: PodTemplateLocation) -> list[tuple[tuple[Any, ...], str]]:
    """The parts of a pod the engine reads as nothing when they are absent, null or empty:
    their paths in `obj`, and the empty value of each ("{}" or "[]")."""
    parts: list[tuple[tuple[Any, ...], str]] = [(tuple(location.metadata), "{}")]
    metadata, spec = tuple(location.metadata), tuple(location.spec)
    parts += [((*metadata, "annotations"), "{}"), ((*metadata, "labels"), "{}")]
    for name, empty in (("nodeSelector", "{}"), ("tolerations", "[]"), ("affinity", "{}")):
        parts.append(((*spec, name), empty))
    parts += [((*spec, "initContainers"), "[]"), ((*spec, "runtimeClassName"), "")]
    found = at(obj, spec)
    for kind in ("initContainers", "containers"):
        listed = found.get(kind) if isinstance(found, dict) else None
        if not isinstance(listed, list) or len(listed) > 8:
            continue
        for index in range(len(listed)):
            base = (*spec, kind, index)
            parts += [((*base, "resources"), "{}"), ((*base, "env"), "[]")]
            parts += [((*base, "resources", "limits"), "{}")]
            parts += [((*base, "resources", "requests"), "{}")]
    return parts


def _spelling(parent: dict[str, Any], key: str) -> str | None:
    """How an empty part is spelled, or None when it holds something."""
    if key not in parent:
        return _ABSENT_PART
    value = parent[key]
    if value is None:
        return _NULL_PART
    if type(value) in (dict, list, str) and not value:
        return _EMPTY_PART
    return None


@st.composite
def respelled(draw: st.DrawFn, obj: Any, location: PodTemplateLocation, one: bool) -> Any:
    """`obj` with some of its empty parts (`one`: one of them) spelled another way than they
    were: absent, null or empty. A sibling differs from its case in one such part only, so
    that the engine reads the two alike and the outcome cache must tell them apart."""
    empties = []
    for path, empty in optional_parts(obj, location):
        parent = at(obj, path[:-1])
        if isinstance(parent, dict) and _spelling(parent, path[-1]) is not None:
            empties.append((parent, path[-1], empty))
    if one and empties:
        empties = [empties[draw(st.integers(0, len(empties) - 1))]]
    for parent, key, empty in empties:
        if not one and draw(st.booleans()):
            continue
        current = _spelling(parent, key)
        others = [s for s in (_ABSENT_PART, _NULL_PART, _EMPTY_PART) if s != current]
        spelling = draw(pick(*others))
        if spelling == _ABSENT_PART:
            parent.pop(key, None)
        elif spelling == _NULL_PART:
            parent[key] = None
        else:
            parent[key] = json.loads(empty) if empty else ""
    return obj


# --- bodies ----------------------------------------------------------------------------------


@st.composite
def encoded(draw: st.DrawFn, document: Any) -> bytes:
    """`document` as the bytes of a body: compact or spaced, ASCII or not, mostly UTF-8 (the
    decoder also takes UTF-16 and UTF-32, and a byte order mark)."""
    text = json.dumps(
        document,
        ensure_ascii=draw(st.booleans()),
        separators=draw(pick((",", ":"), (", ", ": "))),
    )
    text = _DEEP_TEXT.sub(lambda m: "[" * int(m[1]) + "]" * int(m[1]), text)
    encoding = draw(st.sampled_from(["utf-8"] * 12 + ["utf-8-sig", "utf-16", "utf-32"]))
    return text.encode(encoding, "surrogatepass")


_ODD_BODIES = [
    b"", b"{", b"}", b"null", b"[]", b"{}", b"\xef\xbb\xbf{}", b"\xff\xfe", b"\x00" * 8,
    b'{"kind": "AdmissionReview"', b'{"kind": "AdmissionReview", "kind": "Pod"}',
    b"[" * 100000, b"{" * 5000, b'"' + b"\\" * 3, b"1e99999", b"-" + b"9" * 5000, b"NaN",
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"\xff"}}',
]  # fmt: skip

byte_bodies = st.one_of(st.binary(max_size=64), pick(*_ODD_BODIES))


@st.composite
def huge_bodies(draw: st.DrawFn) -> bytes:
    """A review of a GPU pod whose annotation makes the body just under, at, or over the
    server's limit on bodies."""
    review = draw(workload_reviews())
    review["request"]["object"] = {
        "metadata": {"annotations": {"note": ""}},
        "spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }
    review["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    review["request"]["operation"] = "CREATE"
    base = len(json.dumps(review).encode())
    size = MAX_BODY_BYTES + draw(pick(-1, 0, 1, 4096))
    review["request"]["object"]["metadata"]["annotations"]["note"] = "x" * (size - base)
    return json.dumps(review).encode()


FAMILIES = ["bytes", "json", "envelope", "request", "request", "workload", "workload",
            "workload", "workload", "workload", "workload", "sibling", "sibling"]  # fmt: skip
Family = Literal["bytes", "json", "envelope", "request", "workload", "sibling", "huge"]


@st.composite
def cases(
    draw: st.DrawFn,
    families: Sequence[Family] = tuple(FAMILIES),  # type: ignore[assignment]
    policy_sets: Sequence[str] = tuple(POLICY_DIRS),
    content_types: bool = False,
) -> Case:
    family = draw(st.sampled_from(families))
    endpoint: Endpoint = draw(pick("mutate", "mutate", "mutate", "validate"))
    policies = draw(st.sampled_from([policy_sets[0], *policy_sets]))
    content_type = draw(content_type_headers) if content_types else "application/json"
    warmup = None
    if family == "bytes":
        body = draw(byte_bodies)
    elif family == "json":
        body = draw(json_values.flatmap(encoded))
    elif family == "envelope":
        body = draw(envelope_reviews().flatmap(encoded))
    elif family == "request":
        body = draw(request_reviews().map(fresh).flatmap(perturbed).flatmap(encoded))
    elif family == "huge":
        body = draw(huge_bodies())
    else:
        review = fresh(draw(workload_reviews()))
        request = review["request"]
        location = POD_TEMPLATE_LOCATIONS[(request["kind"]["group"], request["kind"]["kind"])]
        if isinstance(request.get("object"), dict):
            request["object"] = draw(respelled(request["object"], location, one=False))
        if family == "sibling" and isinstance(request.get("object"), dict):
            sibling = copy.deepcopy(review)
            sibling["request"]["object"] = draw(
                respelled(sibling["request"]["object"], location, one=True)
            )
            sibling["request"]["uid"] = f"{request['uid']}-sibling"
            warmup = draw(encoded(sibling))
        if draw(st.integers(0, 2)) == 0:
            review = draw(perturbed(review, ("request", "object")))
        body = draw(encoded(review))
    return Case(family, body, endpoint, policies, content_type, warmup)


content_type_headers = st.sampled_from(
    ["application/json"] * 12
    + [
        "application/json; charset=utf-8",
        "Application/JSON",
        " application/json ",
        "text/plain",
        "",
        "application/jsonx",
        "application/yaml",
        "application/json;",
        "multipart/form-data",
    ]
)


def family_cases(*families: Family, **options: Any) -> st.SearchStrategy[Case]:
    return cases(families=families, **options)
