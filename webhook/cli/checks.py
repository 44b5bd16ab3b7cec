"""Does an answer meet its expectation? The checks work on the AdmissionReview a server sends
back, so they hold for any transport: the in-process answer of `webhook test`, or a reply of
the real server over HTTPS.

Beyond what the expectation says, every case checks what must hold of every answer: the uid
and apiVersion are echoed, every warning is one line under 120 characters, an object the patch
produced yields no patch when it is sent again (reinvocation), and `/validate` allows what
`/mutate` produced.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch
import jsonpointer

from webhook.cli.cases import Expectation
from webhook.cli.render import unified_diff
from webhook.engine.evaluate import Mode
from webhook.warning_text import MAX_WARNING_LENGTH

SHOWN_OPERATIONS = 3

# Sends a review to an endpoint and returns the AdmissionReview that comes back.
Post = Callable[[Mode, Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class Failure:
    reason: str
    details: tuple[str, ...] = ()


def check_case(
    review: Mapping[str, Any], endpoint: Mode, expect: Expectation, post: Post
) -> list[Failure]:
    """Every way the answer to `review` at `endpoint` misses `expect`; empty when it meets it."""
    answer = post(endpoint, review)
    failures = _envelope(review, answer, expect)
    if failures:
        return failures
    response: Mapping[str, Any] = answer["response"]
    verdict = _verdict(response, expect)
    if verdict:
        return [verdict]
    failures.extend(_denial(response, expect))
    failures.extend(_warnings(response, expect))
    failures.extend(_annotations(response, expect))
    failures.extend(_patch(review, endpoint, response, expect, post))
    return failures


def _envelope(
    review: Mapping[str, Any], answer: Mapping[str, Any], expect: Expectation
) -> list[Failure]:
    if answer.get("kind") != "AdmissionReview" or not isinstance(answer.get("response"), dict):
        return [Failure(f"the answer is not an AdmissionReview: {_short(answer)}")]
    failures: list[Failure] = []
    api_version = expect.api_version or review.get("apiVersion")
    if answer.get("apiVersion") != api_version:
        failures.append(Failure(f"answered in {answer.get('apiVersion')!r}, not {api_version!r}"))
    uid, echoed = review.get("request", {}).get("uid"), answer["response"].get("uid")
    if echoed != uid:
        failures.append(Failure(f"the answer's uid {echoed!r} is not the review's {uid!r}"))
    return failures


def _verdict(response: Mapping[str, Any], expect: Expectation) -> Failure | None:
    allowed = response.get("allowed")
    if allowed is expect.allowed:
        if allowed and "status" in response:
            return Failure(f"allowed, but with a status: {_short(response['status'])}")
        return None
    if allowed:
        return Failure("expected a denial, but it was allowed")
    status = response.get("status", {})
    return Failure(
        f"expected it allowed, but it was denied ({status.get('code')}): {status.get('message')}"
    )


def _denial(response: Mapping[str, Any], expect: Expectation) -> list[Failure]:
    if expect.allowed:
        return []
    status = response.get("status", {})
    message = status.get("message", "")
    failures: list[Failure] = []
    if expect.code is not None and status.get("code") != expect.code:
        failures.append(Failure(f"denied with code {status.get('code')}, not {expect.code}"))
    failures.extend(
        Failure(f"the message lacks {fragment!r}; it is {message!r}")
        for fragment in expect.message
        if fragment not in message
    )
    return failures


def _warnings(response: Mapping[str, Any], expect: Expectation) -> list[Failure]:
    warnings: list[str] = response.get("warnings", [])
    failures = [
        Failure(f"a warning is not one line of at most {MAX_WARNING_LENGTH} chars: {warning!r}")
        for warning in warnings
        if "\n" in warning or len(warning) > MAX_WARNING_LENGTH
    ]
    for fragment in expect.warnings:
        if not any(fragment in warning for warning in warnings):
            given = "; ".join(repr(w) for w in warnings) if warnings else "there were none"
            failures.append(Failure(f"no warning contains {fragment!r}; warnings: {given}"))
    return failures


def _annotations(response: Mapping[str, Any], expect: Expectation) -> list[Failure]:
    given: Mapping[str, str] = response.get("auditAnnotations", {})
    failures = [
        Failure(f"audit annotation {key!r} is {given.get(key)!r}, not {value!r}")
        for key, value in expect.audit_annotations.items()
        if given.get(key) != value
    ]
    if expect.policy is not None and given.get("policy") != expect.policy:
        if given.get("policy") is None:
            failures.append(Failure(f"no policy judged it; expected policy {expect.policy!r}"))
        else:
            failures.append(Failure(f"judged by policy {given['policy']!r}, not {expect.policy!r}"))
    return failures


def _patch(
    review: Mapping[str, Any],
    endpoint: Mode,
    response: Mapping[str, Any],
    expect: Expectation,
    post: Post,
) -> list[Failure]:
    original = review.get("request", {}).get("object")
    try:
        patch = decoded_patch(response)
    except ValueError as error:
        return [Failure(f"the patch cannot be read: {error}")]
    if not expect.patched:
        if patch is not None or "patchType" in response:
            return [Failure(f"expected no patch, got {_operations(patch)}")]
        if expect.allowed and original is not None and endpoint == "mutate":
            return _validate_allows(review, original, post)
        return []
    if patch is None:
        return [Failure("expected a patch, got none")]
    if response.get("patchType") != "JSONPatch":
        return [Failure(f"patchType is {response.get('patchType')!r}, not 'JSONPatch'")]
    try:
        patched = jsonpatch.apply_patch(original, patch)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
        return [Failure(f"the patch does not apply to the object: {error}")]
    failures: list[Failure] = []
    if expect.mutated is not None and patched != expect.mutated:
        diff = unified_diff(
            expect.mutated,
            patched,
            "yaml",
            before_name=expect.mutated_source or "expected",
            after_name="patched",
            sort_keys=True,
        )
        failures.append(
            Failure(f"the patched object differs from {expect.mutated_source}", tuple(diff))
        )
    failures.extend(_second_pass_is_empty(review, patched, post))
    failures.extend(_validate_allows(review, patched, post))
    return failures


def _second_pass_is_empty(review: Mapping[str, Any], obj: Any, post: Post) -> list[Failure]:
    """reinvocationPolicy IfNeeded may send the webhook its own output: nothing changes then."""
    response = post("mutate", with_object(review, obj))["response"]
    if response.get("allowed") is not True:
        message = response.get("status", {}).get("message")
        return [Failure(f"the patched object, sent again, is denied: {message}")]
    patch = decoded_patch(response)
    if patch is not None:
        return [Failure(f"the patched object, sent again, gets {_operations(patch)}")]
    return []


def _validate_allows(review: Mapping[str, Any], obj: Any, post: Post) -> list[Failure]:
    response = post("validate", with_object(review, obj))["response"]
    if response.get("allowed") is not True:
        message = response.get("status", {}).get("message")
        return [Failure(f"/validate denies what /mutate let through: {message}")]
    if "patch" in response:
        return [Failure("/validate answered with a patch")]
    return []


def with_object(review: Mapping[str, Any], obj: Any) -> dict[str, Any]:
    """`review` again with another object and a uid of its own."""
    again = copy.deepcopy(dict(review))
    again["request"]["object"] = obj
    again["request"]["uid"] = f"{review['request']['uid']}-again"
    return again


def decoded_patch(response: Mapping[str, Any]) -> Any:
    if "patch" not in response:
        return None
    try:
        return json.loads(base64.b64decode(response["patch"], validate=True))
    except (binascii.Error, ValueError, TypeError) as error:
        raise ValueError(str(error)) from None


def _operations(patch: Any) -> str:
    if not isinstance(patch, list):
        return "a patch that is not a list"
    first = [op for op in patch[:SHOWN_OPERATIONS] if isinstance(op, dict)]
    shown = ", ".join(f"{op.get('op')} {op.get('path')}" for op in first)
    more = f", and {len(patch) - SHOWN_OPERATIONS} more" if len(patch) > SHOWN_OPERATIONS else ""
    return f"{len(patch)} operations ({shown}{more})"


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."
