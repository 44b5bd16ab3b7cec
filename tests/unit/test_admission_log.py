"""What an admission is counted and logged as: verdict names, kind labels and the record."""

from __future__ import annotations

import logging

import pytest

from webhook.admission.answer import Admission
from webhook.admission.review import ReviewEnvelope, read_request
from webhook.admission.verdict import Verdict
from webhook.server.admission_log import AdmissionRecord, log_rejection, verdict_name
from webhook.server.metrics import kind_label

PATCH = ({"op": "add", "path": "/metadata/labels", "value": {}},)


@pytest.mark.parametrize(
    ("verdict", "name"),
    [
        (Verdict.allow(), "allowed"),
        (Verdict.allow(warnings=["w"], audit={"policy": "default"}), "allowed"),
        (Verdict.patched(PATCH), "patched"),
        (Verdict.deny("no"), "denied"),
        (Verdict.bad_object("request.object must be a Pod object"), "denied"),
        (Verdict.errored("the GPU webhook failed"), "errored"),
    ],
    ids=["allowed", "allowed with warnings", "patched", "denied", "malformed object", "fault"],
)
def test_verdict_names(verdict: Verdict, name: str) -> None:
    assert verdict_name(verdict) == name


@pytest.mark.parametrize(
    ("group", "kind", "label"),
    [
        ("", "Pod", "Pod"),
        ("apps", "Deployment", "Deployment"),
        ("batch", "CronJob", "CronJob"),
        ("", "ConfigMap", "other"),
        ("example.com", "Pod", "other"),
        ("", "", ""),
    ],
)
def test_kinds_the_webhook_does_not_judge_share_one_label(
    group: str, kind: str, label: str
) -> None:
    assert kind_label(group, kind) == label


def envelope(request: dict) -> ReviewEnvelope:
    return ReviewEnvelope("admission.k8s.io/v1", "u-1", {"uid": "u-1", **request})


def test_a_pod_named_by_the_apiserver_later_is_logged_with_its_generate_name() -> None:
    request = {
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "ml",
        "object": {"metadata": {"generateName": "llm-serve-5d9c7b-"}},
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
    }
    source = envelope(request)
    admission = Admission(source, read_request(source), Verdict.allow())
    fields = AdmissionRecord.of("mutate", admission, 0.0004).fields()
    assert fields["name"] == "" and fields["generateName"] == "llm-serve-5d9c7b-"
    assert fields["durationMs"] == 0.4
    assert "replicaset-controller" not in str(fields)


def test_a_request_that_cannot_be_read_is_logged_as_a_denial_without_a_kind() -> None:
    verdict = Verdict.bad_object("request.kind must be an object with group, version and kind")
    admission = Admission(envelope({"operation": "CREATE"}), None, verdict)
    record = AdmissionRecord.of("validate", admission, 0.001)
    assert (record.kind, record.verdict, record.policy) == ("", "denied", "")
    assert record.fields()["code"] == 400


def test_a_long_rejection_reason_is_cut(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="webhook.admission"):
        log_rejection("mutate", 400, "kind is '" + "x" * 10_000 + "', not 'AdmissionReview'")
    (logged,) = caplog.records
    assert len(logged.fields["error"]) == 200  # type: ignore[attr-defined]
    assert logged.fields["verdict"] == "bad_request"  # type: ignore[attr-defined]
