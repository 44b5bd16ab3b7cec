"""The TLS Secret that keeps the CA and the serving certificate in the cluster, read and written
through the kubernetes client. Writes are optimistic: a create that finds the Secret, or an
update whose resourceVersion is stale, raises `Conflict` for the caller to read again."""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from webhook.certs.renewal import FILE_NAMES
from webhook.kube import raw_json
from webhook.kube.api_errors import short_reason

SECRET_TYPE = "kubernetes.io/tls"
FIELD_MANAGER = "gpu-webhook-certs"
REQUEST_TIMEOUT = (5.0, 30.0)
HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409


class Conflict(Exception):
    """Another writer got there first."""


class ApiError(Exception):
    """A request the Kubernetes API refused or never answered, said in one line."""

    def __init__(self, doing: str, error: BaseException) -> None:
        super().__init__(f"{doing}: {short_reason(error)}")


@dataclass(frozen=True)
class StoredSecret:
    body: Mapping[str, Any]
    files: Mapping[str, bytes]

    @property
    def type(self) -> str:
        return str(self.body.get("type") or "Opaque")

    @property
    def resource_version(self) -> str:
        return str(self.body["metadata"].get("resourceVersion", ""))


class TLSSecret:
    def __init__(self, core: CoreV1Api, namespace: str, name: str) -> None:
        self._core = core
        self.namespace = namespace
        self.name = name

    def __str__(self) -> str:
        return f"Secret {self.namespace}/{self.name}"

    def read(self) -> StoredSecret | None:
        try:
            body: dict[str, Any] = raw_json.call(
                self._core.read_namespaced_secret,
                self.name,
                self.namespace,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                return None
            raise ApiError(f"reading {self}", error) from error
        except Exception as error:
            raise ApiError(f"reading {self}", error) from error
        return StoredSecret(body, _decoded(body.get("data") or {}))

    def create(self, files: Mapping[str, bytes]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "type": SECRET_TYPE,
            "data": _encoded(files),
        }
        self._write(
            f"creating {self}",
            lambda: raw_json.call(
                self._core.create_namespaced_secret,
                self.namespace,
                body,
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )

    def update(self, current: StoredSecret, files: Mapping[str, bytes]) -> None:
        """Replace the certificate keys of `current`; other keys, labels and annotations stay.
        The body carries `current`'s resourceVersion, so a newer Secret is not overwritten."""
        body = copy.deepcopy(dict(current.body))
        # Left out, the apiserver keeps them; sent back, they would be re-parsed for nothing.
        body["metadata"].pop("managedFields", None)
        body["data"] = {**(body.get("data") or {}), **_encoded(files)}
        self._write(
            f"updating {self}",
            lambda: raw_json.call(
                self._core.replace_namespaced_secret,
                self.name,
                self.namespace,
                body,
                field_manager=FIELD_MANAGER,
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )

    def _write(self, doing: str, request: Callable[[], object]) -> None:
        try:
            request()
        except ApiException as error:
            if error.status == HTTP_CONFLICT:
                raise Conflict(f"{doing}: {short_reason(error)}") from error
            raise ApiError(doing, error) from error
        except Exception as error:
            raise ApiError(doing, error) from error


def _encoded(files: Mapping[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(files[name]).decode("ascii") for name in FILE_NAMES}


def _decoded(data: Mapping[str, Any]) -> dict[str, bytes]:
    """The certificate keys of a Secret's data; a value that is not base64 is left out."""
    files: dict[str, bytes] = {}
    for name in FILE_NAMES:
        value = data.get(name)
        if not isinstance(value, str):
            continue
        try:
            files[name] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
    return files
