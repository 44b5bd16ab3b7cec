"""One kept-alive HTTPS connection to the real server, and the review it sends."""

from __future__ import annotations

import http.client
import json
import ssl
import uuid

from tests.support.mounted_tls import peer_serial
from tests.support.server import FRACTIONAL_POD_REVIEW, WebhookServer

REVIEW = json.loads(FRACTIONAL_POD_REVIEW.read_text())


def review_body(uid: str) -> bytes:
    return json.dumps({**REVIEW, "request": {**REVIEW["request"], "uid": uid}}).encode()


def check_answer(body: bytes, uid: str) -> None:
    answer = json.loads(body)["response"]
    assert answer["uid"] == uid
    assert answer["allowed"] is True and answer["patch"]


class KeptAlive:
    """One HTTPS connection that is never opened again behind the test's back."""

    def __init__(self, server: WebhookServer) -> None:
        context = ssl.create_default_context(cafile=str(server.certificates.ca_cert))
        self.https = http.client.HTTPSConnection(
            "localhost", server.port, context=context, timeout=30
        )
        self.https.connect()

    def worker(self) -> int:
        self.https.request("GET", "/readyz")
        response = self.https.getresponse()
        assert response.status == 200 and not response.will_close
        return int(json.loads(response.read())["worker"])

    def review(self) -> None:
        uid = str(uuid.uuid4())
        headers = {"Content-Type": "application/json"}
        self.https.request("POST", "/mutate", body=review_body(uid), headers=headers)
        response = self.https.getresponse()
        assert response.status == 200 and not response.will_close
        check_answer(response.read(), uid)

    @property
    def serial(self) -> int:
        return peer_serial(self.https)

    def close(self) -> None:
        self.https.close()
