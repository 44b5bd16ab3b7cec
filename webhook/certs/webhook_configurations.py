"""The mutating and validating webhook configurations (admissionregistration.k8s.io/v1) whose
caBundle the certificate Job sets, read and JSON-patched through the kubernetes client."""

from __future__ import annotations

from typing import Any, Literal

from kubernetes.client import AdmissionregistrationV1Api
from kubernetes.client.exceptions import ApiException

from webhook.certs.tls_secret import (
    FIELD_MANAGER,
    HTTP_CONFLICT,
    HTTP_NOT_FOUND,
    REQUEST_TIMEOUT,
    ApiError,
    Conflict,
)
from webhook.kube import raw_json
from webhook.kube.api_errors import short_reason

Kind = Literal["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
KINDS: tuple[Kind, ...] = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
JSON_PATCH = "application/json-patch+json"
# What the apiserver answers when a patch does not apply, a failed `test` among them.
HTTP_UNPROCESSABLE = 422


class Missing(Exception):
    """The configuration does not exist."""


class WebhookConfiguration:
    def __init__(self, admission: AdmissionregistrationV1Api, kind: Kind, name: str) -> None:
        self._admission = admission
        self.kind = kind
        self.name = name

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"

    def read(self) -> dict[str, Any]:
        read = (
            self._admission.read_mutating_webhook_configuration
            if self.kind == "MutatingWebhookConfiguration"
            else self._admission.read_validating_webhook_configuration
        )
        try:
            found: dict[str, Any] = raw_json.call(read, self.name, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                raise Missing(str(self)) from error
            raise ApiError(f"reading {self}", error) from error
        except Exception as error:
            raise ApiError(f"reading {self}", error) from error
        return found

    def patch(self, operations: list[dict[str, Any]]) -> None:
        """Apply a JSON patch; Conflict when the configuration changed since it was read."""
        patch = (
            self._admission.patch_mutating_webhook_configuration
            if self.kind == "MutatingWebhookConfiguration"
            else self._admission.patch_validating_webhook_configuration
        )
        try:
            patch(
                self.name,
                operations,
                field_manager=FIELD_MANAGER,
                _content_type=JSON_PATCH,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as error:
            if error.status == HTTP_NOT_FOUND:
                raise Missing(str(self)) from error
            if error.status in (HTTP_CONFLICT, HTTP_UNPROCESSABLE):
                raise Conflict(f"patching {self}: {short_reason(error)}") from error
            raise ApiError(f"patching {self}", error) from error
        except Exception as error:
            raise ApiError(f"patching {self}", error) from error
