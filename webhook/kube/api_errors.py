"""One line on why a request to the Kubernetes API failed, for logs and for messages."""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

HTTP_FORBIDDEN = 403
HTTP_NOT_FOUND = 404
HTTP_GONE = 410


def is_gone(error: BaseException) -> bool:
    """A watch or list from a resourceVersion the apiserver no longer holds."""
    return isinstance(error, ApiException) and error.status == HTTP_GONE


def short_reason(error: BaseException) -> str:
    """One line on why a request failed, for logs and for the unknown-labels reason."""
    if isinstance(error, ApiException):
        return _api_error_reason(error)
    if isinstance(error, MaxRetryError) and error.reason is not None:
        error = error.reason
    root: BaseException = error
    while root.__cause__ is not None:
        root = root.__cause__
    # Before the timeout test: urllib3's NewConnectionError is a ConnectTimeoutError.
    if isinstance(root, OSError) and root.strerror and not isinstance(root, TimeoutError):
        return root.strerror.lower()
    if isinstance(error, Urllib3Timeout | TimeoutError) or isinstance(root, TimeoutError):
        return "timed out"
    return _clip(str(error) or type(error).__name__)


def _api_error_reason(error: ApiException) -> str:
    if not error.status:
        return _clip(" ".join(str(error.reason or "request failed").split()))
    message = ""
    if error.body:
        try:
            message = json.loads(error.body).get("message", "")
        except (ValueError, AttributeError):
            message = ""
    return _clip(f"HTTP {error.status} {message or error.reason or ''}".strip())


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
