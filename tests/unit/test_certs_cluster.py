"""`python -m webhook.certs cluster` against a fake kube-apiserver, through the real kubernetes
client configured from a kubeconfig file: the TLS Secret, the caBundle of both webhook
configurations, renewal, and writers that get in between."""

from __future__ import annotations

import base64
import copy
import http.client
import json
import ssl
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.support.fake_apiserver import FakeApiServer, RecordedRequest
from webhook.certs import create_ca, issue_serving_certificate, main, service_hosts
from webhook.certs.pem import certificate_pem, key_pem, load_certificate, load_private_key

pytestmark = pytest.mark.usefixtures("no_proxy")

TOKEN = "certs-token"
NAMESPACE = "gpu-system"
SERVICE = "gpu-admission"
SECRET = "gpu-admission-tls"
WEBHOOK_NAME = "gpu-admission"
SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}"
SECRETS_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
MUTATING_PATH = f"{ADMISSION}/mutatingwebhookconfigurations/{WEBHOOK_NAME}"
VALIDATING_PATH = f"{ADMISSION}/validatingwebhookconfigurations/{WEBHOOK_NAME}"
JSON_PATCH = "application/json-patch+json"
CERT_NAMES = {"ca.crt", "ca.key", "tls.crt", "tls.key"}


def webhook(name: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"service": {"namespace": NAMESPACE, "name": SERVICE, "path": path}},
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "*",
            }
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }


MUTATING = [
    webhook("pods.mutate.gpu-admission.example.com", "/mutate"),
    webhook("workloads.mutate.gpu-admission.example.com", "/mutate"),
]
VALIDATING = [webhook("pods.validate.gpu-admission.example.com", "/validate")]


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        server.add_webhook_configuration("mutating", WEBHOOK_NAME, MUTATING)
        server.add_webhook_configuration("validating", WEBHOOK_NAME, VALIDATING)
        yield server


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = api.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> Run:
    def run(*extra: str) -> tuple[int, str, str]:
        argv = [
            "cluster",
            "--namespace",
            NAMESPACE,
            "--service",
            SERVICE,
            "--secret",
            SECRET,
            "--webhook-name",
            WEBHOOK_NAME,
            "--kube",
            "kubeconfig",
            *extra,
        ]
        code = main(argv)
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


# --- helpers ---------------------------------------------------------------------------------


def files_of(secret: dict[str, Any]) -> dict[str, bytes]:
    return {name: base64.b64decode(value) for name, value in secret["data"].items()}


def stored_files(api: FakeApiServer) -> dict[str, bytes]:
    secret = api.secret(NAMESPACE, SECRET)
    assert secret is not None
    return files_of(secret)


def ca_bundles(api: FakeApiServer, kind: str) -> list[bytes | None]:
    configuration = api.webhook_configuration(kind, WEBHOOK_NAME)
    assert configuration is not None
    bundles = [hook["clientConfig"].get("caBundle") for hook in configuration["webhooks"]]
    return [None if bundle is None else base64.b64decode(bundle) for bundle in bundles]


def calls(requests: list[RecordedRequest]) -> list[tuple[str, str]]:
    return [(request.method, request.path) for request in requests]


def writes_after(api: FakeApiServer, mark: int) -> list[tuple[str, str]]:
    return calls([r for r in api.requests()[mark:] if r.method != "GET"])


def load(pem: bytes) -> x509.Certificate:
    cert = load_certificate(pem)
    assert cert is not None
    return cert


def handshake(tmp_path: Path, files: dict[str, bytes], ca_bundle: bytes, hostname: str) -> None:
    """A TLS handshake in memory: the server presents tls.crt, the client trusts only
    `ca_bundle` and checks `hostname`, as the kube-apiserver does calling the webhook."""
    (tmp_path / "hs.crt").write_bytes(files["tls.crt"])
    (tmp_path / "hs.key").write_bytes(files["tls.key"])
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "hs.crt", tmp_path / "hs.key")
    client_context = ssl.create_default_context(cadata=ca_bundle.decode())
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(to_client, to_server, server_hostname=hostname)
    server = server_context.wrap_bio(to_server, to_client, server_side=True)
    done = {client: False, server: False}
    for _ in range(10):
        for side in (client, server):
            if not done[side]:
                try:
                    side.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        if all(done.values()):
            return
    raise AssertionError("the handshake did not finish")


def with_serving_certificate(
    api: FakeApiServer, valid_days: int, hosts: list[str] | None = None
) -> dict[str, bytes]:
    """Replace the stored serving certificate with one from the same CA, as another writer."""
    secret = api.secret(NAMESPACE, SECRET)
    assert secret is not None
    files = files_of(secret)
    ca_key = load_private_key(files["ca.key"])
    assert ca_key is not None
    hosts = service_hosts(SERVICE, NAMESPACE) if hosts is None else hosts
    cert, key = issue_serving_certificate(load(files["ca.crt"]), ca_key, hosts, valid_days)
    files |= {"tls.crt": certificate_pem(cert), "tls.key": key_pem(key)}
    secret["data"] = {name: base64.b64encode(data).decode() for name, data in files.items()}
    api.put_secret(NAMESPACE, secret)
    return files


def tls_secret(files: dict[str, bytes], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, **metadata},
        "type": "kubernetes.io/tls",
        "data": {name: base64.b64encode(data).decode() for name, data in files.items()},
    }


def other_jobs_files(days: int = 365) -> dict[str, bytes]:
    ca_cert, ca_key = create_ca("another Job's CA")
    cert, key = issue_serving_certificate(ca_cert, ca_key, service_hosts(SERVICE, NAMESPACE), days)
    return {
        "ca.crt": certificate_pem(ca_cert),
        "ca.key": key_pem(ca_key),
        "tls.crt": certificate_pem(cert),
        "tls.key": key_pem(key),
    }


# --- the first run ----------------------------------------------------------------------------


def test_the_first_run_creates_the_secret_and_sets_both_ca_bundles(
    api: FakeApiServer, run: Run
) -> None:
    code, out, err = run()

    assert (code, err) == (0, "")
    assert calls(api.writes()) == [
        ("POST", SECRETS_PATH),
        ("PATCH", MUTATING_PATH),
        ("PATCH", VALIDATING_PATH),
    ]
    post, mutating_patch, validating_patch = api.writes()
    assert post.body["metadata"] == {"name": SECRET, "namespace": NAMESPACE}
    assert post.body["type"] == "kubernetes.io/tls"
    assert set(post.body["data"]) == CERT_NAMES

    ca_pem = stored_files(api)["ca.crt"]
    bundle = base64.b64encode(ca_pem).decode()
    assert mutating_patch.content_type == JSON_PATCH
    assert mutating_patch.body == [
        {"op": "test", "path": "/webhooks/0/name", "value": MUTATING[0]["name"]},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle},
        {"op": "test", "path": "/webhooks/1/name", "value": MUTATING[1]["name"]},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": bundle},
    ]
    assert validating_patch.content_type == JSON_PATCH
    assert len(validating_patch.body) == 2

    assert ca_bundles(api, "mutating") == [ca_pem, ca_pem]
    assert ca_bundles(api, "validating") == [ca_pem]
    # Nothing but the caBundle changed.
    configuration = api.webhook_configuration("mutating", WEBHOOK_NAME)
    assert configuration is not None
    for hook in configuration["webhooks"]:
        del hook["clientConfig"]["caBundle"]
    assert configuration["webhooks"] == MUTATING

    lines = out.splitlines()
    assert lines[0].startswith(f"Secret {NAMESPACE}/{SECRET}: created, with a new CA")
    assert lines[1] == (
        f"MutatingWebhookConfiguration {WEBHOOK_NAME}: caBundle set in "
        f"{MUTATING[0]['name']}, {MUTATING[1]['name']}"
    )
    assert lines[2].startswith(f"ValidatingWebhookConfiguration {WEBHOOK_NAME}: caBundle set")
    assert len(lines) == 3


def test_the_certificates_verify_against_the_ca_with_the_service_names_and_usages(
    api: FakeApiServer, run: Run, tmp_path: Path
) -> None:
    assert run()[0] == 0
    files = stored_files(api)
    ca, cert = load(files["ca.crt"]), load(files["tls.crt"])
    ca_key, key = load_private_key(files["ca.key"]), load_private_key(files["tls.key"])
    assert ca_key is not None and key is not None

    cert.verify_directly_issued_by(ca)
    assert isinstance(ca_key.curve, ec.SECP256R1) and isinstance(key.curve, ec.SECP256R1)
    assert cert.public_key() == key.public_key()
    assert ca.public_key() == ca_key.public_key()

    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "gpu-admission",
        "gpu-admission.gpu-system",
        "gpu-admission.gpu-system.svc",
        "gpu-admission.gpu-system.svc.cluster.local",
    ]
    assert san.get_values_for_type(x509.IPAddress) == []
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_cert_sign
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca

    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign

    now = datetime.now(UTC)
    assert timedelta(days=3649) < ca.not_valid_after_utc - now <= timedelta(days=3650)
    assert timedelta(days=364) < cert.not_valid_after_utc - now <= timedelta(days=365)

    # What the kube-apiserver does: trust the caBundle, call the Service by its DNS name.
    bundle = ca_bundles(api, "validating")[0]
    assert bundle is not None
    handshake(tmp_path, files, bundle, f"{SERVICE}.{NAMESPACE}.svc")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(tmp_path, files, bundle, "other.gpu-system.svc")


# --- idempotence ------------------------------------------------------------------------------


def test_a_second_run_changes_nothing_and_says_so(api: FakeApiServer, run: Run) -> None:
    assert run()[0] == 0
    secret_before = api.secret(NAMESPACE, SECRET)
    mark = len(api.requests())

    code, out, err = run()

    assert (code, err) == (0, "")
    assert writes_after(api, mark) == []
    assert calls(api.requests()[mark:]) == [
        ("GET", SECRET_PATH),
        ("GET", MUTATING_PATH),
        ("GET", VALIDATING_PATH),
    ]
    assert api.secret(NAMESPACE, SECRET) == secret_before
    lines = out.splitlines()
    assert lines[0].startswith(f"Secret {NAMESPACE}/{SECRET}: unchanged, the serving certificate")
    assert (
        lines[1]
        == f"MutatingWebhookConfiguration {WEBHOOK_NAME}: caBundle up to date in 2 webhooks"
    )
    assert (
        lines[2]
        == f"ValidatingWebhookConfiguration {WEBHOOK_NAME}: caBundle up to date in 1 webhook"
    )
    assert lines[3] == "nothing changed: the Secret and the caBundles are up to date"


def test_only_the_webhooks_without_the_ca_bundle_are_patched(api: FakeApiServer, run: Run) -> None:
    assert run()[0] == 0
    stale = copy.deepcopy(MUTATING)
    stale[0]["clientConfig"]["caBundle"] = base64.b64encode(stored_files(api)["ca.crt"]).decode()
    stale[1]["clientConfig"]["caBundle"] = base64.b64encode(b"an old CA").decode()
    api.add_webhook_configuration("mutating", WEBHOOK_NAME, stale)
    mark = len(api.requests())

    code, out, _ = run()

    assert code == 0
    assert writes_after(api, mark) == [("PATCH", MUTATING_PATH)]
    bundle = base64.b64encode(stored_files(api)["ca.crt"]).decode()
    (patch,) = [r for r in api.requests()[mark:] if r.method == "PATCH"]
    assert patch.body == [
        {"op": "test", "path": "/webhooks/1/name", "value": MUTATING[1]["name"]},
        {"op": "replace", "path": "/webhooks/1/clientConfig/caBundle", "value": bundle},
    ]
    assert f"caBundle set in {MUTATING[1]['name']}" in out


# --- renewal ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(
            lambda api: with_serving_certificate(api, 10),
            "the serving certificate expires on",
            id="near-expiry",
        ),
        pytest.param(
            lambda api: with_serving_certificate(api, 365, service_hosts("old-name", NAMESPACE)),
            "does not cover gpu-admission, gpu-admission.gpu-system,",
            id="service-renamed",
        ),
    ],
)
def test_a_due_serving_certificate_is_renewed_from_the_same_ca(
    api: FakeApiServer,
    run: Run,
    tmp_path: Path,
    damage: Callable[[FakeApiServer], Any],
    reason: str,
) -> None:
    assert run()[0] == 0
    old_bundle = ca_bundles(api, "mutating")[0]
    assert old_bundle is not None
    old_files = damage(api)
    read_version = api.secret(NAMESPACE, SECRET)["metadata"]["resourceVersion"]  # type: ignore[index]
    mark = len(api.requests())

    code, out, err = run()

    assert (code, err) == (0, "")
    # The CA is kept, so the caBundle is not touched.
    assert writes_after(api, mark) == [("PUT", SECRET_PATH)]
    put = api.requests()[mark:][1]
    assert put.body["metadata"]["resourceVersion"] == read_version
    new_files = stored_files(api)
    assert new_files["ca.crt"] == old_files["ca.crt"]
    assert new_files["ca.key"] == old_files["ca.key"]
    assert new_files["tls.crt"] != old_files["tls.crt"]
    assert new_files["tls.key"] != old_files["tls.key"]
    # The caBundle the apiserver already holds verifies the new certificate.
    handshake(tmp_path, new_files, old_bundle, f"{SERVICE}.{NAMESPACE}.svc")
    new_cert = load(new_files["tls.crt"])
    assert new_cert.not_valid_after_utc - datetime.now(UTC) > timedelta(days=364)
    first = out.splitlines()[0]
    assert first.startswith(
        f"Secret {NAMESPACE}/{SECRET}: serving certificate renewed from the same CA"
    )
    assert reason in first
    assert "nothing changed" not in out


def test_the_renewal_window_is_a_flag(api: FakeApiServer, run: Run) -> None:
    assert run()[0] == 0
    with_serving_certificate(api, 10)
    mark = len(api.requests())

    assert run("--renew-before-days", "5")[0] == 0
    assert writes_after(api, mark) == []

    assert run("--renew-before-days", "12")[0] == 0
    assert writes_after(api, mark) == [("PUT", SECRET_PATH)]


@pytest.mark.parametrize("days", ["-1", "365", "soon"])
def test_an_unusable_renewal_window_is_a_usage_error(
    api: FakeApiServer, run: Run, days: str
) -> None:
    with pytest.raises(SystemExit) as exit:
        run("--renew-before-days", days)
    assert exit.value.code == 2
    assert api.requests() == []


def test_a_ca_near_its_end_is_replaced_and_the_ca_bundles_follow(
    api: FakeApiServer, run: Run
) -> None:
    ca_cert, ca_key = create_ca("an old CA", 20)
    cert, key = issue_serving_certificate(ca_cert, ca_key, service_hosts(SERVICE, NAMESPACE), 20)
    old = {
        "ca.crt": certificate_pem(ca_cert),
        "ca.key": key_pem(ca_key),
        "tls.crt": certificate_pem(cert),
        "tls.key": key_pem(key),
    }
    api.put_secret(NAMESPACE, tls_secret(old))

    code, out, _ = run()

    assert code == 0
    assert calls(api.writes()) == [
        ("PUT", SECRET_PATH),
        ("PATCH", MUTATING_PATH),
        ("PATCH", VALIDATING_PATH),
    ]
    new = stored_files(api)
    assert new["ca.crt"] != old["ca.crt"]
    assert ca_bundles(api, "mutating") == [new["ca.crt"], new["ca.crt"]]
    assert "new CA and serving certificate; the caBundle changes" in out
    assert "the CA expires on" in out


def test_a_secret_without_the_ca_key_gets_a_new_ca(api: FakeApiServer, run: Run) -> None:
    files = other_jobs_files()
    del files["ca.key"]
    api.put_secret(NAMESPACE, tls_secret(files))

    assert run()[0] == 0
    new = stored_files(api)
    assert new["ca.crt"] != files["ca.crt"]
    load(new["tls.crt"]).verify_directly_issued_by(load(new["ca.crt"]))


def test_other_keys_labels_and_annotations_of_the_secret_are_kept(
    api: FakeApiServer, run: Run
) -> None:
    files = other_jobs_files(days=10)
    secret = tls_secret(files, labels={"team": "gpu"}, annotations={"note": "keep me"})
    secret["data"]["extra"] = base64.b64encode(b"not ours").decode()
    api.put_secret(NAMESPACE, secret)

    assert run()[0] == 0
    stored = api.secret(NAMESPACE, SECRET)
    assert stored is not None
    assert stored["metadata"]["labels"] == {"team": "gpu"}
    assert stored["metadata"]["annotations"] == {"note": "keep me"}
    assert base64.b64decode(stored["data"]["extra"]) == b"not ours"
    assert files_of(stored)["ca.crt"] == files["ca.crt"]


def test_a_secret_of_another_type_is_refused(api: FakeApiServer, run: Run) -> None:
    api.put_secret(
        NAMESPACE, {"metadata": {"name": SECRET}, "type": "Opaque", "data": {"password": "eA=="}}
    )

    code, out, err = run()

    assert code == 1
    assert out == ""
    assert err == (
        f"error: Secret {NAMESPACE}/{SECRET} has type Opaque, not kubernetes.io/tls: delete it, "
        "or name another Secret with --secret\n"
    )
    assert api.writes() == []


# --- other writers ----------------------------------------------------------------------------


def test_a_secret_created_by_another_job_meanwhile_is_used(api: FakeApiServer, run: Run) -> None:
    theirs = other_jobs_files()
    api.before_next("POST", SECRETS_PATH, lambda: api.put_secret(NAMESPACE, tls_secret(theirs)))

    code, _, err = run()

    assert (code, err) == (0, "")
    assert calls(api.requests()) == [
        ("GET", SECRET_PATH),
        ("POST", SECRETS_PATH),  # 409 AlreadyExists: the other Job won
        ("GET", SECRET_PATH),
        ("GET", MUTATING_PATH),
        ("PATCH", MUTATING_PATH),
        ("GET", VALIDATING_PATH),
        ("PATCH", VALIDATING_PATH),
    ]
    assert stored_files(api) == theirs
    assert ca_bundles(api, "mutating") == [theirs["ca.crt"], theirs["ca.crt"]]


def test_a_secret_updated_by_someone_else_meanwhile_is_read_again(
    api: FakeApiServer, run: Run
) -> None:
    assert run()[0] == 0
    with_serving_certificate(api, 10)
    stale = api.secret(NAMESPACE, SECRET)
    assert stale is not None

    def label_it() -> None:
        changed = copy.deepcopy(stale)
        changed["metadata"]["labels"] = {"touched-by": "someone"}
        api.put_secret(NAMESPACE, changed)

    api.before_next("PUT", SECRET_PATH, label_it)
    mark = len(api.requests())

    code, _, err = run()

    assert (code, err) == (0, "")
    assert calls(api.requests()[mark:])[:4] == [
        ("GET", SECRET_PATH),
        ("PUT", SECRET_PATH),  # 409 Conflict: the Secret moved on
        ("GET", SECRET_PATH),
        ("PUT", SECRET_PATH),
    ]
    first_put, second_put = [r for r in api.requests()[mark:] if r.method == "PUT"]
    assert first_put.body["metadata"]["resourceVersion"] == stale["metadata"]["resourceVersion"]
    stored = api.secret(NAMESPACE, SECRET)
    assert stored is not None
    assert second_put.body["metadata"]["resourceVersion"] != stale["metadata"]["resourceVersion"]
    assert stored["metadata"]["labels"] == {"touched-by": "someone"}
    assert load(files_of(stored)["tls.crt"]).not_valid_after_utc > datetime.now(UTC) + timedelta(
        days=300
    )


def test_a_webhook_list_reordered_meanwhile_is_read_again(api: FakeApiServer, run: Run) -> None:
    reordered = [MUTATING[1], MUTATING[0]]
    api.before_next(
        "PATCH",
        MUTATING_PATH,
        lambda: api.add_webhook_configuration("mutating", WEBHOOK_NAME, reordered),
    )

    code, _, err = run()

    assert (code, err) == (0, "")
    patches = [r for r in api.requests() if r.path == MUTATING_PATH and r.method == "PATCH"]
    assert len(patches) == 2  # the first failed its `test` (422) and was made again
    ca_pem = stored_files(api)["ca.crt"]
    assert ca_bundles(api, "mutating") == [ca_pem, ca_pem]


# --- missing webhook configurations ------------------------------------------------------------


@pytest.fixture
def api_without_validating() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        server.add_webhook_configuration("mutating", WEBHOOK_NAME, MUTATING)
        yield server


def test_a_missing_webhook_configuration_is_an_error(
    api_without_validating: FakeApiServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    api = api_without_validating
    monkeypatch.setenv("KUBECONFIG", str(api.write_kubeconfig(tmp_path / "kubeconfig")))
    argv = [
        "cluster",
        *("--namespace", NAMESPACE, "--service", SERVICE, "--secret", SECRET),
        *("--webhook-name", WEBHOOK_NAME, "--kube", "kubeconfig"),
    ]

    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"error: ValidatingWebhookConfiguration {WEBHOOK_NAME} not found: apply the webhook "
        "configurations before this Job sets their caBundle, or pass --allow-missing-webhook\n"
    )
    # The rest is still done.
    assert calls(api.writes()) == [("POST", SECRETS_PATH), ("PATCH", MUTATING_PATH)]

    assert main([*argv, "--allow-missing-webhook"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert (
        f"ValidatingWebhookConfiguration {WEBHOOK_NAME}: not found; skipped "
        "(--allow-missing-webhook)"
    ) in captured.out.splitlines()


# --- no API -------------------------------------------------------------------------------------


def test_no_kubeconfig_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    argv = ["cluster", "--namespace", "n", "--service", "s", "--secret", "x", "--webhook-name", "w"]

    assert main([*argv, "--kube", "kubeconfig"]) == 1
    assert capsys.readouterr().err == (
        "error: no Kubernetes API to talk to: no kubeconfig: KUBECONFIG is not set and "
        "~/.kube/config is missing\n"
    )


def test_an_api_that_refuses_is_an_error_naming_the_request(api: FakeApiServer, run: Run) -> None:
    api.token = "another token"

    code, out, err = run()

    assert code == 1
    assert out == ""
    assert err == f"error: reading Secret {NAMESPACE}/{SECRET}: HTTP 401 Unauthorized\n"


# --- the fake answers as the API does ------------------------------------------------------------


def fake_request(
    api: FakeApiServer, method: str, path: str, body: bytes, content_type: str
) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", api.port, timeout=5)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": content_type}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_the_fake_refuses_other_patch_types_and_stale_updates_as_the_api_does(
    api: FakeApiServer,
) -> None:
    code, body = fake_request(api, "PATCH", MUTATING_PATH, b"{}", "application/merge-patch+json")
    assert code == 415
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the body of the request was in an unknown format - accepted media types "
        "include: application/json-patch+json",
        "reason": "UnsupportedMediaType",
        "code": 415,
    }

    api.put_secret(NAMESPACE, tls_secret({}))
    stale = b'{"metadata": {"name": "%s", "resourceVersion": "1"}}' % SECRET.encode()
    code, body = fake_request(api, "PUT", SECRET_PATH, stale, "application/json")
    assert code == 409
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Operation cannot be fulfilled on secrets "{SECRET}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        "reason": "Conflict",
        "details": {"name": SECRET, "kind": "secrets"},
        "code": 409,
    }

    code, body = fake_request(api, "GET", f"{ADMISSION}/mutatingwebhookconfigurations/x", b"", "")
    assert code == 404
    assert (
        body["message"]
        == 'mutatingwebhookconfigurations.admissionregistration.k8s.io "x" not found'
    )
    assert body["details"] == {
        "name": "x",
        "group": "admissionregistration.k8s.io",
        "kind": "mutatingwebhookconfigurations",
    }


def test_a_service_name_that_cannot_be_a_certificate_name_is_a_usage_error(
    api: FakeApiServer, run: Run
) -> None:
    # A later --service wins, as argparse reads options; the kubeconfig names the fake API.
    code, _, err = run("--service", "bad name")

    assert code == 2
    assert err == "error: invalid host name: 'bad name'\n"
    assert api.requests() == []
