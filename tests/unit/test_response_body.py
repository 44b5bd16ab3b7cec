"""The JSON text the server sends is encode_response's review, whatever the verdict, and a
verdict reused for many requests is encoded once."""

import base64
import json

import pytest

from webhook.admission.review import encode_response, response_body
from webhook.admission.verdict import Verdict
from webhook.engine.patch import JsonPatch

PATCH = (
    {"op": "add", "path": "/spec/containers/0/resources/limits/example.com~1vram", "value": "3840"},
    {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"},
)
VERDICTS = {
    "allowed": Verdict.allow(),
    "allowed with warnings": Verdict.allow(warnings=['GPU policy "p" applied'], audit={"a": "b"}),
    "patched": Verdict.patched(PATCH, warnings=["é and \u2028"], audit={"policy": "p"}),
    "denied": Verdict.deny('Pod "x": requests differ "quoted"', audit={"policy": "p"}),
    "bad object": Verdict.bad_object("request.object must be a Pod object"),
    "errored": Verdict.errored("the GPU webhook failed on this request"),
}


@pytest.mark.parametrize("name", VERDICTS)
@pytest.mark.parametrize("api_version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_the_body_is_the_encoded_review(name: str, api_version: str) -> None:
    verdict = VERDICTS[name]
    uid = 'uid-"with"-\\-quotes'
    body = response_body(api_version, uid, verdict)
    assert json.loads(body) == encode_response(api_version, uid, verdict)
    compact = json.dumps(encode_response(api_version, uid, verdict), separators=(",", ":"))
    assert body == compact.encode()


def test_a_reused_verdict_is_encoded_once_and_answers_each_uid() -> None:
    verdict = Verdict.patched(PATCH)
    first = json.loads(response_body("admission.k8s.io/v1", "one", verdict))
    cached = verdict.members_json()
    second = json.loads(response_body("admission.k8s.io/v1", "two", verdict))
    assert verdict.members_json() is cached
    assert (first["response"]["uid"], second["response"]["uid"]) == ("one", "two")
    assert first["response"]["patch"] == second["response"]["patch"]


def test_the_patch_is_base64_of_its_json_and_is_encoded_once() -> None:
    patch = JsonPatch(PATCH)
    assert json.loads(base64.b64decode(patch.base64)) == list(PATCH)
    assert patch.base64 is patch.base64
    assert JsonPatch.of(patch) is patch
    assert Verdict.patched(patch).patch is patch


def test_a_plain_allow_is_one_shared_verdict() -> None:
    assert Verdict.allow() is Verdict.allow()
    assert Verdict.allow(warnings=["w"]) is not Verdict.allow()
