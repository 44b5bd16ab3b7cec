"""One request, sent with the standard library, to see that a server is up and answers right
before wrk measures it."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
CA_FILE = Path("certs/ca.crt")


def _connection(port: int, timeout: float) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(CA_FILE))
    return http.client.HTTPSConnection(HOST, port, context=context, timeout=timeout)


class ProbeError(Exception):
    """The server answers, but not in a way any later look would change."""


def healthy(port: int, timeout: float = 2.0) -> bool:
    """Whether the server answers /healthz; False too while the development CA does not exist
    yet (`make run` creates it). Raises ProbeError when its certificate is not one the CA
    signed: the server is up, serving other certificates (TLS_CERT_FILE set elsewhere)."""
    try:
        connection = _connection(port, timeout)
    except OSError:
        return False
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except ssl.SSLCertVerificationError as error:
        raise ProbeError(
            f"the server's certificate is not one {CA_FILE} signed ({error.verify_message}); "
            "the benchmark serves the development pair: unset TLS_CERT_FILE and TLS_KEY_FILE"
        ) from None
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def post_review(port: int, body: bytes, path: str = "/mutate") -> tuple[int, Any]:
    """The HTTP status and the decoded JSON answer (None when the body is not JSON)."""
    connection = _connection(port, 10.0)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    try:
        return response.status, json.loads(data)
    except ValueError:
        return response.status, None
