"""The record of what the webhook manages in a pod, kept in one annotation.

Later passes read it to tell the webhook's own changes from the user's: the VRAM it sized
(which a fresh fraction may resize, or a whole GPU replace), the env variables it injected
(recomputed when the share or the model changes, where a user's own value would stay),
whether it pinned the model, the runtimeClassName it set (absent from the record when the
pod's own, or none), and the tolerations and nodeSelector entries it added for the share (so
that a pod that goes back to whole GPUs, or a policy that no longer asks for them, loses
them), and what the backend wrote for each share and on the pod (resources, a resource
claim and its template, annotations, labels, schedulerName), which a later pass reads back
as the share rather than as the user's; and what holds the shares to their size below the
scheduler (`hardLimit`, "None" where nothing does and only the frameworks told their share
keep it). Pods created from a rewritten template inherit it, so they are measured against
the same model even when their controller rewrote the node affinity that named it (a
DaemonSet binds its pods to a node by name).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.policy.defaults import SHARES_ANNOTATION

# The record of a pod with as many containers as the engine reads, with room to spare; a longer
# one was not written by this webhook.
MAX_RECORD_CHARS = 256 * 1024


@dataclass(frozen=True)
class ContainerShare:
    """`vram`: the share in the policy's unit; `given`: the resources the backend wrote for it
    (empty in records written before backends, where it was the VRAM resource alone)."""

    asked: str
    vram: str
    env: tuple[str, ...] = ()
    given: Mapping[str, str] = field(default_factory=dict)
    # Variables of `env` where the webhook owns one entry of a `key:value` list: the key.
    merged: Mapping[str, str] = field(default_factory=dict)
    # The share in MiB, beside `given`: read back whatever unit the policy has since.
    mib: str = ""
    # Written for whoever audits the pod, and read back by no pass (the spec says them): what
    # a hard limit holds the container to where it is not the share (KAI's isolator), and the
    # cards the share is on, each with `vram` of its own (HAMi), where more than one.
    limit_mib: str = ""
    cards: int = 1
    # A DRA share: the pod's claim the container uses, and the template it is made from.
    claim: str = ""
    template: str = ""


@dataclass(frozen=True)
class ShareRecord:
    model: str | None = None
    pinned: bool = False
    containers: Mapping[str, ContainerShare] = field(default_factory=dict)
    runtime_class_name: str | None = None
    # What the webhook added to the spec for the share, as it wrote them.
    tolerations: tuple[Mapping[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # What the backend wrote on the pod itself: annotations, labels and schedulerName.
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None
    # What holds the shares below the scheduler ("None": nothing does): for whoever audits.
    hard_limit: str | None = None

    @classmethod
    def read(cls, annotations: Mapping[str, Any]) -> ShareRecord:
        """The record in `annotations`; one that does not parse counts as none, so that the
        pod is judged afresh rather than refused for an annotation a person edited."""
        text = annotations.get(SHARES_ANNOTATION)
        if not isinstance(text, str) or len(text) > MAX_RECORD_CHARS:
            return cls()
        try:
            data = json.loads(text)
            return cls(
                model=_optional_string(data.get("model")),
                pinned=data.get("pinned") is True,
                containers={
                    name: ContainerShare(
                        asked=str(entry["asked"]),
                        vram=str(entry["vram"]),
                        env=_strings(entry.get("env", [])),
                        given=_string_map(entry.get("given", {})),
                        merged=_string_map(entry.get("merged", {})),
                        mib=str(entry.get("mib", "")),
                        claim=_string(entry.get("claim", "")),
                        template=_string(entry.get("template", "")),
                    )
                    for name, entry in data["containers"].items()
                },
                runtime_class_name=_optional_string(data.get("runtimeClassName")),
                tolerations=tuple(_toleration(item) for item in data.get("tolerations", ())),
                node_selector=_string_map(data.get("nodeSelector", {})),
                annotations=_string_map(data.get("annotations", {})),
                labels=_string_map(data.get("labels", {})),
                scheduler_name=_optional_string(data.get("schedulerName")),
                hard_limit=_optional_string(data.get("hardLimit")),
            )
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            # RecursionError: JSON nested deeper than the decoder, or str(), will go.
            return cls()

    def encode(self) -> str:
        containers = {
            name: _container_entry(share) for name, share in sorted(self.containers.items())
        }
        data: dict[str, Any] = {
            "model": self.model,
            "pinned": self.pinned,
            "containers": containers,
        }
        # Written only when set, so records of policies without one read as they always have.
        if self.runtime_class_name is not None:
            data["runtimeClassName"] = self.runtime_class_name
        if self.tolerations:
            data["tolerations"] = [dict(toleration) for toleration in self.tolerations]
        if self.node_selector:
            data["nodeSelector"] = dict(sorted(self.node_selector.items()))
        for key, found in (("annotations", self.annotations), ("labels", self.labels)):
            if found:
                data[key] = dict(sorted(found.items()))
        if self.scheduler_name is not None:
            data["schedulerName"] = self.scheduler_name
        if self.hard_limit is not None:
            data["hardLimit"] = self.hard_limit
        return json.dumps(data, separators=(",", ":"))

    def given_of(self, container: str, vram_resource: str) -> Mapping[str, str]:
        """The resources the webhook wrote for a container's share (in records from before
        backends, the VRAM resource alone)."""
        entry = self.containers.get(container)
        if entry is None or entry.claim:
            return {}  # a DRA share's resources are its claim
        return entry.given or {vram_resource: entry.vram}

    def vram_of(self, container: str) -> str | None:
        share = self.containers.get(container)
        return share.vram if share else None


def _container_entry(share: ContainerShare) -> dict[str, Any]:
    entry: dict[str, Any] = {"asked": share.asked, "vram": share.vram, "env": list(share.env)}
    if share.given:
        entry["given"] = dict(share.given)
    if share.given or share.claim:
        entry["mib"] = share.mib
    if share.claim:
        entry["claim"] = share.claim
        entry["template"] = share.template
    if share.merged:
        entry["merged"] = dict(sorted(share.merged.items()))
    if share.limit_mib:
        entry["limitMiB"] = share.limit_mib
    if share.cards != 1:
        entry["cards"] = share.cards
    return entry


def _toleration(value: object) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("a toleration must be an object")
    return value


def _string_map(value: object) -> Mapping[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise TypeError("must map names to strings")
    return value


def _strings(value: object) -> tuple[str, ...]:
    """A list of names: anything else (a string, whose letters would read as names) makes the
    record unreadable, so the pod is judged afresh and no variable of its user is taken."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError("must be a list of names")
    return tuple(value)


def _string(value: object) -> str:
    if isinstance(value, str):
        return value
    raise TypeError("must be a string")


def _optional_string(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError("must be a string")


NO_RECORD = ShareRecord()
