"""The request bodies measured, built from the reviews a real kube-apiserver sent
(tests/scenarios/shipped), and the shape of the answer each must get.

Bodies are written compact, as the apiserver sends them; the captured files are indented.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from webhook.cli.admit import review_body

SHIPPED = Path("tests/scenarios/shipped")
REVIEWS_DIR = Path("bench/reviews")
GPU_POD = "01-create-pod-frac-quarter"
PLAIN_POD = "11-create-pod-plain-web"
DEPLOYMENT = "05-create-deployment-llm-serve"
# The shipped policy rewrites every one of 40 fractional containers (each gets its own share of
# VRAM), so pod-40 keeps a fractional GPU ask in each: 25m of an A100 80GB, 2048 MiB, so that
# the forty shares fit on the one card they share.
MANY_CONTAINERS = 40
MANY_CONTAINERS_SHARE = "25m"
MANY_CONTAINERS_MODEL = "NVIDIA-A100-SXM4-80GB"

Expect = Literal["patched", "allowed"]


@dataclass(frozen=True)
class Scenario:
    name: str
    review: Mapping[str, Any]
    expect: Expect
    description: str

    @cached_property
    def body(self) -> bytes:
        return review_body(self.review)

    @property
    def uid(self) -> str:
        return str(self.review["request"]["uid"])


def captured(folder: str, root: Path = SHIPPED) -> dict[str, Any]:
    """A captured review as the apiserver posted it (without the harness's `_http` note)."""
    review = json.loads((root / folder / "review.json").read_text())
    review.pop("_http", None)
    return review


def with_containers(review: Mapping[str, Any], count: int) -> dict[str, Any]:
    """The pod review with its first container cloned `count` times, named `<name>-00`,
    `<name>-01`, ...; everything else as captured."""
    grown = copy.deepcopy(dict(review))
    spec = grown["request"]["object"]["spec"]
    template = spec["containers"][0]
    width = max(2, len(str(count - 1)))
    spec["containers"] = [
        _renamed(template, f"{template['name']}-{index:0{width}d}") for index in range(count)
    ]
    return grown


def on_card(review: Mapping[str, Any], model: str, share: str) -> dict[str, Any]:
    """The pod review with its first container asking `share` of a GPU of `model`."""
    moved = copy.deepcopy(dict(review))
    spec = moved["request"]["object"]["spec"]
    resources = spec["containers"][0]["resources"]
    for field_name in ("limits", "requests"):
        if "nvidia.com/gpu" in resources.get(field_name, {}):
            resources[field_name]["nvidia.com/gpu"] = share
    spec.setdefault("nodeSelector", {})["nvidia.com/gpu.product"] = model
    return moved


def _renamed(container: Mapping[str, Any], name: str) -> dict[str, Any]:
    clone = copy.deepcopy(dict(container))
    clone["name"] = name  # in place, so the keys keep their captured order
    return clone


def in_namespace(review: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """The review as if its object had been created in `namespace`."""
    moved = copy.deepcopy(dict(review))
    moved["request"]["namespace"] = namespace
    moved["request"]["object"]["metadata"]["namespace"] = namespace
    return moved


def build_scenarios(root: Path = SHIPPED) -> tuple[Scenario, ...]:
    gpu_pod = captured(GPU_POD, root)
    return (
        Scenario("gpu-pod", gpu_pod, "patched", "a pod asking nvidia.com/gpu 250m"),
        Scenario("plain-pod", captured(PLAIN_POD, root), "allowed", "a pod without GPUs"),
        Scenario(
            f"pod-{MANY_CONTAINERS}",
            with_containers(
                on_card(gpu_pod, MANY_CONTAINERS_MODEL, MANY_CONTAINERS_SHARE), MANY_CONTAINERS
            ),
            "patched",
            f"the gpu-pod with {MANY_CONTAINERS} containers, each asking "
            f"{MANY_CONTAINERS_SHARE} of an {MANY_CONTAINERS_MODEL}",
        ),
        Scenario("deployment", captured(DEPLOYMENT, root), "patched", "a Deployment asking 500m"),
    )


def write_reviews(scenarios: Iterable[Scenario], directory: Path = REVIEWS_DIR) -> dict[str, Path]:
    """Write each body to `<directory>/<name>.json` (unless it is already there) for wrk."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    for scenario in scenarios:
        path = directory / f"{scenario.name}.json"
        body = scenario.body
        if not path.is_file() or path.read_bytes() != body:
            path.write_bytes(body)
        files[scenario.name] = path
    return files


def answer_problem(expect: Expect, uid: str, answer: Any) -> str | None:
    """What is wrong with `answer` for a review with `uid` that should be `expect`, or None."""
    if not isinstance(answer, dict) or answer.get("kind") != "AdmissionReview":
        return "the answer is not an AdmissionReview"
    response = answer.get("response")
    if not isinstance(response, dict):
        return "the answer has no response"
    if response.get("uid") != uid:
        return f"response.uid is {response.get('uid')!r}, not {uid!r}"
    if response.get("allowed") is not True:
        message = (response.get("status") or {}).get("message", "")
        return f"the review was not allowed: {message}"
    if expect == "patched" and not response.get("patch"):
        return "the answer carries no patch"
    if expect == "patched" and response.get("patchType") != "JSONPatch":
        return f"patchType is {response.get('patchType')!r}, not 'JSONPatch'"
    if expect == "allowed" and "patch" in response:
        return "the answer carries a patch; the object should be allowed unchanged"
    return None
