"""The ResourceClaimTemplate of a DRA share, as data, and the names the pod knows it by.

A template asks for one device: of the policy's DeviceClass, with the share's memory as
consumable capacity (`exactly.capacity.requests`), or, where the policy lists alternatives,
a `firstAvailable` list of them in its order. Its name is made from its content: every pod
whose share renders the same template (same class, size and configuration) in a namespace
uses the one template, and a change of any of them is a template of another name, never an
edit of one that running pods were made from.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from webhook.engine.backends.mig import smallest_profile
from webhook.engine.shares import SizedShare
from webhook.policy.defaults import API_GROUP
from webhook.policy.model import DraAlternative, DraChoice, DraSettings

CLAIM_API_VERSION = "resource.k8s.io/v1"
TEMPLATE_KIND = "ResourceClaimTemplate"
# What marks a template as this product's: the sweep removes only these, once unused.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-admission"
# The digest of the template's spec, which its name is made from: the apiserver stores the
# spec with defaults and canonical quantities, so a writer that meets the template again
# compares this rather than the spec.
SPEC_DIGEST_ANNOTATION = f"{API_GROUP}/spec-digest"
# The request of the claim (containers use every request of it: they name none).
REQUEST_NAME = "gpu"
_SUBREQUEST_NAMES = {
    DraAlternative.MIG: "mig",
    DraAlternative.SHARE: "share",
    DraAlternative.WHOLE_GPU: "whole",
}
_CLAIM_PREFIX = "gpu-share-"
# A pod's claim names are DNS labels.
_MAX_CLAIM_NAME = 63


# The least memory a request may ask of NVIDIA's and HAMi's devices (their validRange min).
REQUEST_MIN_MIB = 1


def request_mib(share: SizedShare, dra: DraSettings) -> int:
    """The memory the claim asks: the share rounded up as the allocator rounds a request, to
    the range's minimum plus whole steps (consumable_capacity.go, calculateConsumedCapacity),
    so that the claim asks what the device gives."""
    step = dra.request_step_mib
    if share.mib <= REQUEST_MIN_MIB:
        return REQUEST_MIN_MIB
    return REQUEST_MIN_MIB + -(-(share.mib - REQUEST_MIN_MIB) // step) * step


def cores_percent(share: SizedShare) -> int:
    """The share's whole percent of the card's compute: its percent of the card's memory,
    rounded down, and at least one (no cores at all is no compute)."""
    return max(1, share.mib * 100 // share.model.memory_mib)


def claim_name(container: str) -> str:
    """The name the pod and its container know the share's claim by."""
    name = _CLAIM_PREFIX + container
    if len(name) <= _MAX_CLAIM_NAME:
        return name
    digest = _digest(container)[:8]
    return f"{name[: _MAX_CLAIM_NAME - len(digest) - 1].rstrip('-')}-{digest}"


def claim_template(share: SizedShare, dra: DraSettings) -> tuple[str, dict[str, Any]]:
    """The template's name and the template (no namespace), for this share under `dra`."""
    request, kept = _request(share, dra)
    devices: dict[str, Any] = {"requests": [request]}
    config = _config(dra, kept)
    if config is not None:
        devices["config"] = [config]
    spec = {"spec": {"devices": devices}}
    digest = _digest(_canonical(spec))
    name = f"{_CLAIM_PREFIX}{request_mib(share, dra)}mi-{digest[:10]}"
    template = {
        "apiVersion": CLAIM_API_VERSION,
        "kind": TEMPLATE_KIND,
        "metadata": {
            "name": name,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": {SPEC_DIGEST_ANNOTATION: digest},
        },
        "spec": spec,
    }
    return name, template


def _request(share: SizedShare, dra: DraSettings) -> tuple[dict[str, Any], list[DraChoice]]:
    """The claim's one request, and the alternatives it kept (a MIG one may be left out)."""
    if not dra.first_available:
        device = _share_device(share, dra, dra.device_class_name)
        return {"name": REQUEST_NAME, "exactly": device}, []
    alternatives = []
    kept = []
    for choice in dra.first_available:
        alternative = _alternative(share, dra, choice)
        if alternative is not None:
            alternatives.append({"name": _SUBREQUEST_NAMES[choice.kind], **alternative})
            kept.append(choice)
    return {"name": REQUEST_NAME, "firstAvailable": alternatives}, kept


def _alternative(share: SizedShare, dra: DraSettings, choice: DraChoice) -> dict | None:
    """One sub-request, or None for a MIG alternative that no profile of the model holds."""
    if choice.kind is DraAlternative.SHARE:
        return _share_device(share, dra, choice.device_class_name, choice.selectors)
    device: dict[str, Any] = {"deviceClassName": choice.device_class_name}
    # The policy's selectors hold for every alternative of its own class (a MIG device is
    # another class's, whose attributes may differ).
    own_class = choice.device_class_name == dra.device_class_name
    selectors = [*(dra.selectors if own_class else ()), *choice.selectors]
    if choice.kind is DraAlternative.MIG:
        profile = smallest_profile(share, share.model.mig_profiles)
        if profile is None:
            return None
        domain = dra.attribute_domain
        selectors.insert(0, f"device.attributes['{domain}'].profile == '{profile.name}'")
    if selectors:
        device["selectors"] = _cel(selectors)
    return device


def _share_device(
    share: SizedShare, dra: DraSettings, device_class: str, own: tuple[str, ...] = ()
) -> dict[str, Any]:
    device: dict[str, Any] = {"deviceClassName": device_class}
    # The policy's selectors hold for its own class (another class's attributes may differ).
    ours = dra.selectors if device_class == dra.device_class_name else ()
    selectors = [*ours, *own]
    if selectors:
        device["selectors"] = _cel(selectors)
    requests = {dra.memory_capacity: f"{request_mib(share, dra)}Mi"}
    if dra.cores_capacity is not None:
        requests[dra.cores_capacity] = str(cores_percent(share))
    device["capacity"] = {"requests": requests}
    return device


def _config(dra: DraSettings, kept: list[DraChoice]) -> dict[str, Any] | None:
    """The policy's opaque configuration, for the sub-requests of its own class where some
    alternative asks another (a GpuConfig is no MIG device's)."""
    if dra.config is None:
        return None
    config: dict[str, Any] = {
        "opaque": {"driver": dra.config["driver"], "parameters": dra.config["parameters"]}
    }
    if any(choice.device_class_name != dra.device_class_name for choice in kept):
        own = [c for c in kept if c.device_class_name == dra.device_class_name]
        if not own:
            return None  # an empty list would mean every request
        config["requests"] = [f"{REQUEST_NAME}/{_SUBREQUEST_NAMES[c.kind]}" for c in own]
    return config


def asks_capacity(spec: object) -> bool:
    """Whether a template's spec asks consumable capacity of any device it requests."""
    devices = ((spec or {}).get("spec") or {}).get("devices") if isinstance(spec, dict) else None
    requests = (devices or {}).get("requests") if isinstance(devices, dict) else None
    for request in requests if isinstance(requests, list) else ():
        if not isinstance(request, dict):
            continue
        asked = [request.get("exactly"), *(request.get("firstAvailable") or ())]
        if any(isinstance(device, dict) and device.get("capacity") for device in asked):
            return True
    return False


def _cel(expressions: list[str]) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}} for expression in expressions]


def _canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _digest(text: str) -> str:
    raw = hashlib.sha256(text.encode()).digest()
    return base64.b32encode(raw).decode("ascii").lower().rstrip("=")
