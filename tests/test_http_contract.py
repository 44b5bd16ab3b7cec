"""The HTTP contract of the real server: endpoints, and bad input answered with a clear,
well-formed reply (4xx for a body that is not a review, an in-band denial otherwise)."""

from __future__ import annotations

import itertools
import json
import re
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.raw_sockets import read_until_closed
from tests.support.server import (
    FRACTIONAL_POD_REVIEW,
    REPO_ROOT,
    WebhookClient,
    WebhookServer,
    run_until_exit,
)
from tests.support.waiting import eventually
from webhook import __version__
from webhook.admission.review import AdmissionRequest
from webhook.policy.policy_set import PolicySet, Selection
from webhook.server.app import create_app
from webhook.server.settings import Settings

UID = "0b6f4e2a-7c1d-4c53-9a55-0d1b8f7e2c11"


def review(request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def pod_request(obj: Any) -> dict[str, Any]:
    return {
        "uid": UID,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "namespace": "ml",
        "name": "p",
        "object": obj,
    }


@pytest.fixture(scope="module")
def client(shipped_server: WebhookServer) -> WebhookClient:
    return shipped_server.client()


def test_health_and_readiness(client: WebhookClient) -> None:
    health = client.request("GET", "/healthz")
    assert health.status == 200 and health.json() == {"status": "ok"}
    ready = client.request("GET", "/readyz")
    # The test servers turn READYZ_DETAILS on.
    assert ready.status == 200 and ready.json()["policies"] == ["default"]
    assert ready.json()["version"] == __version__


def test_readiness_tells_an_anonymous_client_only_its_status_by_default() -> None:
    app = create_app(Settings(policy_dir=REPO_ROOT / "policies"))
    ready = app.test_client().get("/readyz")
    assert ready.status_code == 200 and ready.get_json() == {"status": "ready"}


def test_the_version_is_in_the_startup_log_and_the_metrics(
    shipped_server: WebhookServer, client: WebhookClient
) -> None:
    assert f"gpu-admission-webhook {__version__} starting" in shipped_server.log()
    text = client.request("GET", "/metrics").body.decode()
    assert f'gpu_webhook_build_info{{version="{__version__}"}} 1.0' in text


NOT_A_REVIEW = [
    (b"not json", "the body is not JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"kind": "Pod"}', "kind is 'Pod', not 'AdmissionReview'"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v2"}', "is not one of"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', "no request object"),
    (json.dumps(review({"kind": {}})).encode(), "request.uid is missing"),
    (json.dumps(review({"uid": 7})).encode(), "request.uid is missing or not a string"),
    (b"\xff\xfe", "the body is not JSON"),
]


@pytest.mark.parametrize(("body", "reason"), NOT_A_REVIEW, ids=[r for _, r in NOT_A_REVIEW])
@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
def test_a_body_that_is_not_a_review_is_a_400_with_a_reason(
    client: WebhookClient, endpoint: str, body: bytes, reason: str
) -> None:
    reply = client.request("POST", endpoint, body, {"Content-Type": "application/json"})
    assert reply.status == 400
    assert reply.headers["Content-Type"] == "application/json"
    assert reason in reply.json()["error"]
    assert b"Traceback" not in reply.body


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
def test_json_is_json_whatever_its_parameters_and_case(
    client: WebhookClient, content_type: str
) -> None:
    body = FRACTIONAL_POD_REVIEW.read_bytes()
    reply = client.request("POST", "/mutate", body, {"Content-Type": content_type})
    assert reply.status == 200 and reply.json()["response"]["patch"]


def test_a_body_that_is_not_json_by_content_type_is_a_415(client: WebhookClient) -> None:
    reply = client.request("POST", "/mutate", b"a=b", {"Content-Type": "text/plain"})
    assert reply.status == 415
    assert "application/json" in reply.json()["error"]


def exchange(server: WebhookServer, request: Iterator[bytes]) -> bytes:
    """Send raw request bytes over TLS and read the reply up to the end of its JSON body."""
    context = ssl.create_default_context(cafile=str(server.certificates.ca_cert))
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        for part in request:
            tls.sendall(part)
        reply = b""
        while b"}" not in reply:
            data = tls.recv(65536)
            if not data:
                break
            reply += data
        return reply


OVER_LIMIT = 8 * 2**20 + 1


def chunks(total: int) -> Iterator[bytes]:
    step = 2**16
    for start in range(0, total, step):
        size = min(step, total - start)
        yield f"{size:x}\r\n".encode() + b" " * size + b"\r\n"
    yield b"0\r\n\r\n"


def front_refusals_of(server: WebhookServer) -> list[dict[str, Any]]:
    # /validate: the chunked test below makes the app itself refuse on /mutate.
    return [
        line
        for line in server.log_records()
        if line.get("httpStatus") == 413 and line.get("endpoint") == "validate"
    ]


def bad_requests_counted(client: WebhookClient) -> float:
    text = client.request("GET", "/metrics").body.decode()
    labels = 'endpoint="validate",kind="",policy="",verdict="bad_request"'
    found = re.search(rf"^gpu_webhook_admissions_total{{{labels}}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_declared_length_over_8_mib_is_a_413_before_the_body_is_read(
    shipped_server: WebhookServer, client: WebhookClient
) -> None:
    logged_before = len(front_refusals_of(shipped_server))
    counted_before = bad_requests_counted(client)
    head = (
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {OVER_LIMIT}\r\n\r\n"
    )
    reply = exchange(shipped_server, iter([head.encode()]))
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b'"the body is larger than 8 MiB"' in reply
    # Answered by the evented front, and still logged (just after the answer is sent) and
    # counted as the app's refusals are.
    eventually(lambda: len(front_refusals_of(shipped_server)) > logged_before)
    refusals = front_refusals_of(shipped_server)
    assert len(refusals) == logged_before + 1
    assert refusals[-1]["verdict"] == "bad_request"
    assert refusals[-1]["error"] == "the body is larger than 8 MiB"
    # Each worker publishes its counts within a second; the scrape may reach the other one.
    eventually(lambda: bad_requests_counted(client) == counted_before + 1, timeout=5)


def test_a_chunked_body_over_8_mib_is_a_413(shipped_server: WebhookServer) -> None:
    head = (
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    reply = exchange(shipped_server, itertools.chain([head.encode()], chunks(OVER_LIMIT)))
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert b'"the body is larger than 8 MiB"' in reply


def test_a_body_just_under_the_cap_is_read(client: WebhookClient) -> None:
    document = review(pod_request({"metadata": {"name": "p"}, "spec": {"containers": []}}))
    text = json.dumps(document).encode()
    body = text + b" " * (8 * 2**20 - len(text))
    reply = client.request("POST", "/mutate", body, {"Content-Type": "application/json"})
    assert reply.status == 200 and reply.json()["response"]["allowed"] is True


def test_a_client_that_waits_for_100_continue_gets_it_then_its_answer(
    shipped_server: WebhookServer,
) -> None:
    # The interim answer a client waits for before it sends its body comes before the body is
    # read, whatever the front holds of the request.
    body = FRACTIONAL_POD_REVIEW.read_bytes()
    head = (
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n"
    )
    context = ssl.create_default_context(cafile=str(shipped_server.certificates.ca_cert))
    with (
        socket.create_connection(("127.0.0.1", shipped_server.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(head.encode())
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            data = tls.recv(1)
            assert data, f"the connection closed after {interim!r}"
            interim += data
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        tls.sendall(body)
        reply = b""
        while b'"patch"' not in reply:
            data = tls.recv(65536)
            assert data, f"the connection closed after {reply[:300]!r}"
            reply += data
    # The front met the expectation; gunicorn must not send a second interim answer.
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")


REVIEW_HEAD = b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


def test_a_chunked_review_is_read_whole_and_answered(shipped_server: WebhookServer) -> None:
    body = FRACTIONAL_POD_REVIEW.read_bytes()
    pieces = [body[: len(body) // 3], body[len(body) // 3 :]]
    chunked = b"".join(f"{len(piece):x}\r\n".encode() + piece + b"\r\n" for piece in pieces)
    request = REVIEW_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n"
    reply = exchange(shipped_server, iter([request]))
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n"), reply[:200]
    assert b'"patch"' in reply


def test_pipelined_reviews_are_each_answered_in_order(shipped_server: WebhookServer) -> None:
    review_document = json.loads(FRACTIONAL_POD_REVIEW.read_text())
    requests = b""
    for uid in ("first-uid", "second-uid"):
        body = json.dumps(
            {**review_document, "request": {**review_document["request"], "uid": uid}}
        )
        requests += REVIEW_HEAD + f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    requests += b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    context = ssl.create_default_context(cafile=str(shipped_server.certificates.ca_cert))
    with (
        socket.create_connection(("127.0.0.1", shipped_server.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(requests)
        replies = read_until_closed(tls)
    assert replies.count(b"HTTP/1.1 200 OK\r\n") == 3
    assert replies.index(b'"first-uid"') < replies.index(b'"second-uid"')


@pytest.mark.parametrize(
    ("head", "status"),
    [
        pytest.param(
            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, id="length and chunked"
        ),
        pytest.param(b"Content-Length: 5\r\nContent-Length: 7\r\n\r\n", 400, id="two lengths"),
        pytest.param(b"Transfer-Encoding: identity\r\n\r\n", 501, id="a coding not served"),
        pytest.param(b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, id="a chunk size not hex"),
    ],
)
def test_a_request_framed_two_ways_is_refused_and_its_connection_closed(
    shipped_server: WebhookServer, head: bytes, status: int
) -> None:
    context = ssl.create_default_context(cafile=str(shipped_server.certificates.ca_cert))
    with (
        socket.create_connection(("127.0.0.1", shipped_server.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        # What would be a second request, smuggled in the first one's body, is never read.
        tls.sendall(REVIEW_HEAD + head + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = read_until_closed(tls)
    assert reply.startswith(f"HTTP/1.1 {status} ".encode()), reply[:200]
    assert reply.count(b"HTTP/1.1 ") == 1


@pytest.mark.parametrize(
    ("method", "path", "status"), [("GET", "/mutate", 405), ("POST", "/nowhere", 404)]
)
def test_unknown_routes_and_methods_answer_json(
    client: WebhookClient, method: str, path: str, status: int
) -> None:
    reply = client.request(method, path, b"{}", {"Content-Type": "application/json"})
    assert reply.status == status
    assert reply.json()["code"] == status


IN_BAND = [
    ({"uid": UID, "operation": "CREATE"}, "request.kind must be an object"),
    (
        {"uid": UID, "kind": {"kind": "Pod"}, "operation": 3},
        "request.operation must be a non-empty string",
    ),
    (pod_request("a pod"), "request.object must be a Pod object"),
    (pod_request({"spec": {"containers": {"name": "a"}}}), "spec.containers: must be a list"),
    (pod_request({"spec": {"containers": [{"image": "x"}]}}), "containers[0].name: must be a"),
    (
        pod_request({"metadata": {"annotations": ["gpu-fraction"]}, "spec": {}}),
        "metadata.annotations: must be an object, not a list",
    ),
]


@pytest.mark.parametrize(("request_body", "reason"), IN_BAND, ids=[r for _, r in IN_BAND])
def test_a_malformed_request_inside_a_review_is_denied_in_band(
    client: WebhookClient, request_body: dict[str, Any], reason: str
) -> None:
    reply = client.post_json("/mutate", review(request_body))
    assert reply.status == 200
    response = reply.json()["response"]
    assert response["uid"] == UID
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert reason in response["status"]["message"]


def test_kinds_without_a_pod_spec_pass_untouched(client: WebhookClient) -> None:
    request = pod_request({"data": {"nvidia.com/gpu": "0.5"}})
    request["kind"] = {"group": "", "version": "v1", "kind": "ConfigMap"}
    response = client.post_json("/mutate", review(request)).json()["response"]
    assert response == {"uid": UID, "allowed": True}


@pytest.fixture(scope="module")
def app_client() -> Any:
    return create_app(Settings(policy_dir=REPO_ROOT / "policies")).test_client()


# gunicorn passes neither on to the application; another WSGI server may. Without a length or
# wsgi.input_terminated, WSGI gives no way to tell where a body ends: it is read as empty.
UNDELIMITED = {
    "a Content-Length that is not a number": ("12x", "the Content-Length header is not a number"),
    "a Content-Length of digits int() refuses": ("2²", "the Content-Length header is not a number"),
    "no length and no end": ("", "the body is not JSON"),
}


@pytest.mark.parametrize(("length", "error"), UNDELIMITED.values(), ids=UNDELIMITED.keys())
def test_a_body_without_a_usable_length_is_a_400(app_client: Any, length: str, error: str) -> None:
    reply = app_client.post(
        "/mutate",
        data=b'{"kind": "AdmissionReview"}',
        content_type="application/json",
        environ_overrides={"CONTENT_LENGTH": length},
    )
    assert reply.status_code == 400 and error in reply.get_json()["error"]


class ExplodingPolicies(PolicySet):
    def select(
        self, namespace: str, object_labels: Any, namespace_labels: Any, models_named: Any = None
    ) -> Selection:
        raise RuntimeError("a bug")


def test_an_unexpected_fault_is_answered_with_the_uid_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policies = ExplodingPolicies(PolicySet.load(REPO_ROOT / "policies").policies)
    app = create_app(Settings(policy_dir=REPO_ROOT / "policies"), policies)
    # A GPU pod: one without GPUs leaves before any policy is chosen.
    gpu_container = {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    document = review(pod_request({"spec": {"containers": [gpu_container]}}))
    reply = app.test_client().post("/mutate", json=document)
    assert reply.status_code == 200
    response = reply.get_json()["response"]
    assert response["uid"] == UID and response["allowed"] is False
    assert response["status"]["code"] == 500
    assert UID in response["status"]["message"]
    assert "Traceback" not in reply.get_data(as_text=True)
    assert "RuntimeError: a bug" in caplog.text


def test_a_bad_policy_stops_startup_with_file_line_and_field(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "team.yaml").write_text(
        "apiVersion: gpu-admission.example.com/v1alpha1\nkind: GPUPolicy\n"
        "metadata: {name: team}\nspec:\n  sharing:\n    vramResource: example.com/vram\n"
        "    unit: KiB\n    models: [{product: Tesla-T4, memoryMiB: 15360}]\n"
    )
    server = WebhookServer(policies, tmp_path / "certs", tmp_path / "log")
    result = run_until_exit(server.environment())
    assert result.returncode != 0
    assert f"{policies / 'team.yaml'}:7: spec.sharing.unit: 'KiB' is not one of" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_certificates_stop_startup_with_what_to_do(tmp_path: Path) -> None:
    server = WebhookServer(REPO_ROOT / "policies", tmp_path / "certs", tmp_path / "log")
    environment = {**server.environment(), "TLS_CERT_FILE": str(tmp_path / "absent.crt")}
    result = run_until_exit(environment)
    assert result.returncode != 0
    assert "absent.crt does not exist: run `make certs`" in result.stderr


def test_requests_are_decoded_into_typed_fields() -> None:
    from webhook.admission.review import decode_envelope, read_request

    body = json.dumps(review({**pod_request({}), "dryRun": True, "subResource": "status"}))
    request = read_request(decode_envelope(body.encode()))
    assert request == AdmissionRequest(
        uid=UID,
        group="",
        version="v1",
        kind="Pod",
        operation="CREATE",
        sub_resource="status",
        namespace="ml",
        name="p",
        object={},
        old_object=None,
        dry_run=True,
    )


@pytest.mark.parametrize(
    ("number", "fragment"),
    [
        pytest.param(
            "1E-400", "the number 1E-400, which cannot be read exactly", id="below a float"
        ),
        pytest.param("1E400", "the number 1E400, which cannot be read exactly", id="above a float"),
        pytest.param(
            "0.30000000000000004441",
            '("0.30000000000000004441")',
            id="more digits than a float keeps",
        ),
    ],
)
def test_a_gpu_quantity_sent_as_a_json_number_is_judged_by_its_text(
    app_client: Any, number: str, fragment: str
) -> None:
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 0}}}
    text = json.dumps(
        review(pod_request({"metadata": {"name": "p"}, "spec": {"containers": [container]}}))
    )
    body = text.replace('"nvidia.com/gpu": 0', f'"nvidia.com/gpu": {number}')
    reply = app_client.post("/mutate", data=body, content_type="application/json")
    answer = reply.get_json()["response"]
    assert reply.status_code == 200 and answer["allowed"] is False
    assert answer["status"]["code"] == 400
    assert fragment in answer["status"]["message"]


def test_a_body_the_server_cannot_read_is_a_400_not_a_500(shipped_server: WebhookServer) -> None:
    body = FRACTIONAL_POD_REVIEW.read_bytes()
    # A trailer the front lets by and gunicorn refuses: a field that must not be one.
    request = (
        REVIEW_HEAD
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\nContent-Length: 5\r\n\r\n"
    )
    reply = exchange(shipped_server, iter([request]))
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert b'"the body could not be read: ' in reply
    assert "Traceback" not in shipped_server.log()
