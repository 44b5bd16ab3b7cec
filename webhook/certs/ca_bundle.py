"""The caBundle of a webhook configuration: the base64 of the CA's PEM in each
`webhooks[*].clientConfig`, and the JSON patch that sets it where it differs."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonpointer import JsonPointer


@dataclass(frozen=True)
class BundlePatch:
    operations: list[dict[str, Any]]
    patched: list[str]  # the names of the webhooks whose caBundle the patch sets
    webhooks: int  # how many webhooks the configuration has


def encode(ca_pem: bytes) -> str:
    return base64.b64encode(ca_pem).decode("ascii")


def ca_bundle_patch(configuration: Mapping[str, Any], ca_pem: bytes) -> BundlePatch:
    """A JSON patch that sets every webhook's caBundle to `ca_pem`, empty when all hold it.

    Each change is guarded by a `test` of the webhook's name at that index: should the list
    change between our read and the patch, the apiserver refuses it (422) instead of setting
    the bundle of another webhook, and we read again."""
    operations: list[dict[str, Any]] = []
    patched: list[str] = []
    webhooks = configuration.get("webhooks") or []
    for index, webhook in enumerate(webhooks):
        client_config = webhook.get("clientConfig") or {}
        if _decoded(client_config.get("caBundle")) == ca_pem:
            continue
        name = webhook.get("name")
        set_bundle = "replace" if "caBundle" in client_config else "add"
        operations.append({"op": "test", "path": _pointer(index, "name"), "value": name})
        operations.append(
            {
                "op": set_bundle,
                "path": _pointer(index, "clientConfig", "caBundle"),
                "value": encode(ca_pem),
            }
        )
        patched.append(str(name))
    return BundlePatch(operations, patched, len(webhooks))


def _pointer(index: int, *names: str) -> str:
    return JsonPointer.from_parts(["webhooks", index, *names]).path


def _decoded(value: object) -> bytes | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
