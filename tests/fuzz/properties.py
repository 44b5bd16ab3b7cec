"""What must hold of the answer to any body, whatever was sent.

- A body over the server's limit gets HTTP 413, one that is not an AdmissionReview HTTP 400
  with a JSON reason; every review gets HTTP 200 and an AdmissionReview that echoes the request's
  uid and apiVersion. Never a 5xx, never a traceback, never a verdict with code 500.
- `allowed` is a boolean; a denial has code 400 or 403 and a message; warnings are one line
  under 120 characters; a patch is a JSONPatch (RFC 6902), and only /mutate sends one.
- A request nested deeper than the webhook reads is denied with code 400 that says so; one
  whose operation, subresource or kind the webhook does not judge, or an UPDATE that leaves
  the pod template as it was, is allowed untouched.
- An allowed patch applies to the object; the object it gives obeys the apiserver's rules for
  extended resources (`extended_resource_problems`); sent again it gets no patch, and
  /validate allows it. What /validate allows obeys the same rules.

`check_case` judges a case in this process, through `judge_in_process`: what the server's
route does with a body (webhook/server/app.py), with the same decoding, judgement, encoding and
log record, minus HTTP. The server tests check the same answers posted over HTTPS. A broken
property raises `PropertyFailure`, named, with what was sent and what came back.
"""

from __future__ import annotations

import base64
import binascii
import copy
import functools
import json
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import jsonpatch

from tests.fuzz.strategies import NAMESPACE_LABELS, POLICY_DIRS, Case, Endpoint, at
from webhook.admission.answer import judge
from webhook.admission.input_bounds import MAX_NESTING_DEPTH
from webhook.admission.review import ReviewDecodeError, decode_envelope
from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS, PodTemplateLocation
from webhook.policy.namespace_labels import StaticNamespaceLabels
from webhook.policy.policy_set import PolicySet
from webhook.server.admission_log import AdmissionRecord
from webhook.server.settings import MAX_BODY_BYTES

SUPPORTED_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
DENIAL_CODES = (400, 403)
# README: "every warning is one line under 120 characters".
WARNING_LENGTH_BELOW = 120
HANDLED_OPERATIONS = ("CREATE", "UPDATE")
LABELS = StaticNamespaceLabels(NAMESPACE_LABELS)


class PropertyFailure(AssertionError):
    """A property that does not hold; `name` says which."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"[{name}] {message}")
        self.name = name
        # Whether the case fails when judged alone, by policies loaded afresh (so with nothing
        # in the webhook's caches for them); None when that was not tried.
        self.alone: bool | None = None


def fail(name: str, message: str) -> PropertyFailure:
    return PropertyFailure(name, message)


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes


# Sends a body to an endpoint, as application/json unless a content type is given, and returns
# the HTTP reply.
Post = Callable[..., Reply]


@functools.cache
def policy_set(name: str) -> PolicySet:
    """The policy set `name`, loaded once: the cases judged by it share the webhook's caches,
    which are owned by the policies they were made for."""
    return fresh_policy_set(name)


def fresh_policy_set(name: str) -> PolicySet:
    """The policy set `name` loaded anew: nothing in the webhook's caches belongs to it yet."""
    return PolicySet.load(POLICY_DIRS[name])


def judge_in_process(policies: PolicySet) -> Post:
    """The route's work on a body, in this process: too large, 413; not a review, 400; else
    judged, encoded and recorded for the log. A fault (the verdict with code 500 the route
    would send) raises at once, with its traceback."""

    def post(body: bytes, endpoint: Endpoint, content_type: str = "application/json") -> Reply:
        if not is_json_media_type(content_type):
            return Reply(415, _error(415, "the body must be an AdmissionReview"))
        if len(body) > MAX_BODY_BYTES:
            return Reply(413, _error(413, "the body is too large"))
        try:
            envelope = decode_envelope(body)
        except ReviewDecodeError as error:
            return Reply(400, _error(400, str(error)))
        faults: list[str] = []

        def fault_message(envelope: Any, error: Exception) -> str:
            faults.append(traceback.format_exc())
            return "the GPU webhook failed on this request"

        admission = judge(envelope, policies, endpoint, LABELS, fault_message)
        if faults:
            raise fail("no-fault", f"uid {envelope.uid!r} was answered with code 500:\n{faults[0]}")
        answer = admission.body()
        AdmissionRecord.of(endpoint, admission, 0.0).fields()
        return Reply(200, answer)

    return post


def _error(code: int, reason: str) -> bytes:
    return json.dumps({"error": reason, "code": code}).encode()


ALONE_NOTE = (
    "\n(judged alone, by the policies loaded afresh, this case passes: the failure depends on "
    "the reviews judged before it in this process, through the webhook's caches)"
)


def check_case(case: Case, policies: PolicySet | None = None) -> str:
    """Every property, for one case, judged in this process; returns what it came to ("200
    patched", "400", ...). Without `policies`, by the shared policy set of its name, whose
    caches hold what earlier cases left; a failure is then tried again alone (`alone`)."""
    shared = policies is None
    policies = policy_set(case.policies) if policies is None else policies
    post = judge_in_process(policies)
    try:
        if case.warmup is not None:
            post(case.warmup, case.endpoint)
        return check_body(case.body, case.endpoint, post, policies, case.content_type)
    except PropertyFailure as failure:
        if shared:
            failure.alone = fails_alone(case)
            if not failure.alone:
                failure.args = (f"{failure.args[0]}{ALONE_NOTE}",)
        raise


def fails_alone(case: Case) -> bool:
    try:
        check_case(case, fresh_policy_set(case.policies))
    except PropertyFailure:
        return True
    return False


# --- the route's part: status and envelope ---------------------------------------------------


def review_in(body: bytes) -> dict[str, Any] | None:
    """The AdmissionReview a body holds, as README's HTTP interface defines one (a JSON object
    of kind AdmissionReview, apiVersion admission.k8s.io/v1 or v1beta1, with a request object
    that has a non-empty string uid), or None: such a body gets HTTP 400."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or document.get("kind") != "AdmissionReview":
        return None
    if document.get("apiVersion") not in SUPPORTED_API_VERSIONS:
        return None
    request = document.get("request")
    if not isinstance(request, dict):
        return None
    uid = request.get("uid")
    return document if isinstance(uid, str) and uid else None


# Nesting from which Python's JSON decoder may give up (RecursionError), depending on the stack
# it is called from: the server's route and this process differ.
DECODER_DEPTH = 500


def text_depth(body: bytes) -> int:
    """How deep arrays and objects nest in a JSON text, read without decoding it."""
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass")
    except (UnicodeDecodeError, LookupError):
        return 0
    deepest = depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def is_json_media_type(content_type: str) -> bool:
    return content_type.partition(";")[0].strip().lower() == "application/json"


def expected_status(body: bytes, content_type: str = "application/json") -> int:
    if not is_json_media_type(content_type):
        return 415
    if len(body) > MAX_BODY_BYTES:
        return 413
    return 200 if review_in(body) is not None else 400


def check_body(
    body: bytes,
    endpoint: Endpoint,
    post: Post,
    policies: PolicySet,
    content_type: str = "application/json",
) -> str:
    reply = post(body, endpoint, content_type)
    expected = expected_status(body, content_type)
    if expected == 200 and reply.status == 400 and text_depth(body) >= DECODER_DEPTH:
        # Past the decoder's own limit, which depends on how deep the stack already is
        # (webhook/admission/input_bounds.py): a transport error, not a review.
        expected = 400
    if reply.status != expected:
        raise fail(
            "status",
            f"HTTP {reply.status}, not {expected}, for a body of {len(body)} bytes: "
            f"{_short(reply.body)}",
        )
    if expected != 200:
        check_error_body(reply)
        return str(expected)
    review = review_in(body)
    assert review is not None
    response = read_answer(reply.body, review)
    return check_verdict(review, endpoint, response, post, policies)


def check_error_body(reply: Reply) -> None:
    if b"Traceback" in reply.body:
        raise fail("no-traceback", _short(reply.body))
    try:
        error = json.loads(reply.body)
    except ValueError:
        raise fail("error-body", f"HTTP {reply.status} with a body that is not JSON") from None
    if not isinstance(error, dict) or error.get("code") != reply.status:
        raise fail("error-body", f"HTTP {reply.status}: {_short(reply.body)}")
    if not isinstance(error.get("error"), str) or not error["error"]:
        raise fail("error-body", f"HTTP {reply.status} without a reason: {_short(reply.body)}")


def read_answer(body: bytes, review: Mapping[str, Any]) -> dict[str, Any]:
    """The response of a well-formed answer to `review`."""
    if b"Traceback" in body:
        raise fail("no-traceback", _short(body))
    try:
        answer = json.loads(body)
    except ValueError as error:
        raise fail("well-formed", f"the answer is not JSON ({error}): {_short(body)}") from None
    if not isinstance(answer, dict) or answer.get("kind") != "AdmissionReview":
        raise fail("well-formed", f"the answer is not an AdmissionReview: {_short(body)}")
    if answer.get("apiVersion") != review["apiVersion"]:
        raise fail(
            "echo", f"answered in {answer.get('apiVersion')!r}, not {review['apiVersion']!r}"
        )
    response = answer.get("response")
    if not isinstance(response, dict):
        raise fail("well-formed", f"the answer has no response object: {_short(body)}")
    if response.get("uid") != review["request"]["uid"]:
        raise fail("echo", f"uid {response.get('uid')!r}, not {review['request']['uid']!r}")
    allowed = response.get("allowed")
    if type(allowed) is not bool:
        raise fail("well-formed", f"allowed is {allowed!r}")
    status = response.get("status")
    if allowed and status is not None:
        raise fail("well-formed", f"allowed, with a status: {status!r}")
    if not allowed:
        _check_denial(status)
    if ("patch" in response) != ("patchType" in response):
        raise fail("well-formed", "a patch without patchType, or patchType without a patch")
    if "patch" in response:
        if not allowed:
            raise fail("well-formed", "a denial with a patch")
        if response["patchType"] != "JSONPatch":
            raise fail("well-formed", f"patchType {response['patchType']!r}")
        response["patch"] = decoded_patch(response["patch"])
    warnings = response.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise fail("well-formed", f"warnings are not strings: {warnings!r}")
    for warning in warnings:
        if "\n" in warning or "\r" in warning or len(warning) >= WARNING_LENGTH_BELOW:
            raise fail("warnings", f"a warning that is not one line under 120: {warning!r}")
    annotations = response.get("auditAnnotations", {})
    if not isinstance(annotations, dict) or not all(
        isinstance(value, str) for value in annotations.values()
    ):
        raise fail("well-formed", f"auditAnnotations: {annotations!r}")
    return response


def _check_denial(status: Any) -> None:
    if not isinstance(status, dict):
        raise fail("well-formed", f"a denial without a status: {status!r}")
    code, message = status.get("code"), status.get("message")
    if code == 500:
        raise fail("no-fault", f"a denial with code 500: {message!r}")
    if code not in DENIAL_CODES:
        raise fail("denial-code", f"a denial with code {code!r}: {message!r}")
    if not isinstance(message, str) or not message.strip():
        raise fail("well-formed", f"a denial without a message: {status!r}")


# RFC 6902: the members each operation needs, and the syntax of a JSON pointer (RFC 6901).
PATCH_OPERATIONS = {
    "add": ("value",),
    "remove": (),
    "replace": ("value",),
    "move": ("from",),
    "copy": ("from",),
    "test": ("value",),
}
_POINTER = re.compile(r"(?:/(?:[^~/]|~[01])*)*", re.DOTALL)


def decoded_patch(text: Any) -> list[dict[str, Any]]:
    """The operations of a response's patch, checked to be an RFC 6902 patch."""
    if not isinstance(text, str):
        raise fail("patch-syntax", f"the patch is not base64 text: {text!r}")
    try:
        patch = json.loads(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError) as error:
        raise fail("patch-syntax", f"the patch is not base64 of JSON: {error}") from None
    if not isinstance(patch, list) or not patch:
        raise fail("patch-syntax", f"the patch is not a list of operations: {patch!r}")
    for operation in patch:
        if not isinstance(operation, dict) or operation.get("op") not in PATCH_OPERATIONS:
            raise fail("patch-syntax", f"not a JSON patch operation: {operation!r}")
        pointers = [operation.get("path")]
        if operation["op"] in ("move", "copy"):
            pointers.append(operation.get("from"))
        for pointer in pointers:
            if not isinstance(pointer, str) or not _POINTER.fullmatch(pointer):
                raise fail("patch-syntax", f"not a JSON pointer: {pointer!r} in {operation!r}")
        for needed in PATCH_OPERATIONS[operation["op"]]:
            if needed not in operation:
                raise fail("patch-syntax", f"{operation['op']} without {needed}: {operation!r}")
    return patch


# --- the judgement's part --------------------------------------------------------------------


def request_depth(request: Any) -> int:
    """How deep objects and arrays nest in the request (the request itself: 1), counted
    without recursion."""
    deepest, stack = 0, [(request, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def reads_cleanly(request: Mapping[str, Any]) -> bool:
    """Whether the request's members are of the types the apiserver sends: a kind object with
    a kind, an operation, and strings (or nothing) where strings go."""
    kind = request.get("kind")
    if not isinstance(kind, dict):
        return False
    for node, key in ((kind, "kind"), (request, "operation")):
        if not isinstance(node.get(key), str) or not node[key]:
            return False
    optional = [(kind, "group"), (kind, "version")]
    optional += [(request, key) for key in ("subResource", "namespace", "name")]
    return all(node.get(key) is None or isinstance(node.get(key), str) for node, key in optional)


JudgedObject = tuple[PodTemplateLocation, dict[str, Any]]


def judged_object(request: Mapping[str, Any]) -> JudgedObject | str:
    """The object the webhook judges, with where its pod template is; or why it judges none:
    "at once" (README: DELETE, CONNECT, subresources and other kinds pass at once; pods are
    judged on CREATE only; an UPDATE that leaves the pod template as it was passes untouched),
    or "malformed" (a kind it judges, but no object)."""
    kind = request.get("kind") if isinstance(request.get("kind"), dict) else {}
    group, name = kind.get("group") or "", kind.get("kind")
    location = None
    if isinstance(group, str) and isinstance(name, str):
        location = POD_TEMPLATE_LOCATIONS.get((group, name))
    operation = request.get("operation")
    if operation not in HANDLED_OPERATIONS or request.get("subResource") or location is None:
        return "at once"
    if location.is_pod and operation == "UPDATE":
        return "at once"
    obj, old = request.get("object"), request.get("oldObject")
    if not isinstance(obj, dict):
        return "malformed"
    if isinstance(old, dict) and all(
        at(obj, path) == at(old, path) for path in (location.metadata, location.spec)
    ):
        return "at once"
    return location, obj


def check_verdict(
    review: Mapping[str, Any],
    endpoint: Endpoint,
    response: Mapping[str, Any],
    post: Post,
    policies: PolicySet,
) -> str:
    request = review["request"]
    allowed, patch = response["allowed"], response.get("patch")
    status = response.get("status") or {}
    if request_depth(request) > MAX_NESTING_DEPTH:
        if allowed or status.get("code") != 400 or "levels deep" not in status.get("message"):
            raise fail("depth-bound", f"a request deeper than {MAX_NESTING_DEPTH}: {response!r}")
        return "200 denied 400"
    judged = judged_object(request)
    if judged == "at once" and reads_cleanly(request) and (not allowed or patch):
        raise fail("at-once", f"{_request_line(request)} is not allowed untouched: {response!r}")
    if not allowed:
        return f"200 denied {status.get('code')}"
    if patch and endpoint == "validate":
        raise fail("validate-never-patches", f"{_short_json(patch)}")
    if isinstance(judged, str):
        if patch:
            raise fail("at-once", f"a patch for an object it does not judge: {patch!r}")
        return "200 allowed"
    location, obj = judged
    patched = applied(obj, patch) if patch else obj
    governs = governed_resources(policies, request, location, obj)
    problems = extended_resource_problems(obj, patched, location, governs)
    if problems:
        raise fail(
            "extended-resource-rules",
            f"{'the patched' if patch else 'the allowed'} object breaks the apiserver's rules: "
            + "; ".join(problems),
        )
    if endpoint == "mutate":
        if patch:
            again = _answer(post, with_object(review, patched, "again"), "mutate", "second-pass")
            if not again["allowed"] or again.get("patch"):
                raise fail("second-pass", f"the patched object, sent again, gets {again!r}")
        checked = _answer(post, with_object(review, patched, "validate"), "validate", "validate")
        if not checked["allowed"] or checked.get("patch"):
            raise fail("validate-allows", f"/validate of what /mutate let through: {checked!r}")
    return "200 patched" if patch else "200 allowed"


def applied(obj: Any, patch: list[dict[str, Any]]) -> Any:
    try:
        return jsonpatch.apply_patch(obj, patch)
    except Exception as error:
        raise fail(
            "patch-applies",
            f"the patch does not apply to the object ({type(error).__name__}: {error}); "
            f"patch: {_short_json(patch)}",
        ) from None


def with_object(review: Mapping[str, Any], obj: Any, suffix: str) -> dict[str, Any]:
    """`review` again with another object and a uid of its own (as the apiserver reinvokes)."""
    again = copy.deepcopy(dict(review))
    again["request"]["object"] = obj
    again["request"]["uid"] = f"{review['request']['uid']}-{suffix}"
    return again


def _answer(post: Post, review: dict[str, Any], endpoint: Endpoint, name: str) -> dict[str, Any]:
    body = json.dumps(review).encode()
    if len(body) > MAX_BODY_BYTES:
        # What the patch added took the review past the server's limit on bodies: the
        # apiserver would be refused with 413 (and no real object comes near 8 MiB).
        return {"allowed": True}
    reply = post(body, endpoint)
    if reply.status != 200:
        raise fail(name, f"HTTP {reply.status}: {_short(reply.body)}")
    return read_answer(reply.body, review)


def governed_resources(
    policies: PolicySet, request: Mapping[str, Any], location: PodTemplateLocation, obj: Any
) -> Callable[[str], bool]:
    """Whether the policy that governs this object governs a resource (as a GPU resource or
    as its VRAM): the ones whose quantities the webhook answers for."""
    namespace = request.get("namespace") or ""
    labels = at(obj, (*location.metadata, "labels"))
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        labels = {}
    policy = policies.select(namespace, labels, LABELS).policy
    return lambda name: policy.is_vram(name) or policy.governing(name) is not None


# --- the apiserver's rules for extended resources --------------------------------------------
#
# The kube-apiserver validates every container's resources, in pods and (ValidatePodTemplateSpec)
# in the pod templates of workloads, with validateResourceRequirements in kubernetes/kubernetes
# pkg/apis/core/validation/validation.go (through ValidateContainerResourceRequirements, with
# validateContainerResourceName for the names):
# - every quantity, in limits and requests, goes through ValidateResourceQuantityValue: it must
#   not be negative ("must be greater than or equal to 0"), and for a resource that
#   helper.IsIntegerResourceName names, which every extended resource is, its
#   MilliValue()%1000 must be 0 ("must be an integer");
# - a request of a resource that helper.IsOvercommitAllowed refuses (every extended resource)
#   "must be equal to <name> limit of <limit>", and a request without a limit is refused
#   ("Limit must be set for non overcommitable resources").
# pkg/apis/core/helper/helpers.go: IsExtendedResourceName is a name that is not native (not in
# the kubernetes.io/ domain: IsNativeResource is "no '/', or contains 'kubernetes.io/'") and not
# prefixed "requests."; IsOvercommitAllowed is native and not hugepages.
#
# The check covers the resources the governing policy governs, and any extended resource whose
# amount the patch changed: an extended resource the webhook neither governs nor touches is the
# apiserver's to refuse, not the webhook's.

# resource.Quantity's grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go): a signed
# number (digits, with a point anywhere), then a binary or decimal suffix or a decimal exponent.
_K8S_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+\.?[0-9]*|\.[0-9]+)"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)",
    re.ASCII,
)
_SUFFIX_VALUE = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    **{
        suffix: Fraction(2 ** (10 * (i + 1)))
        for i, suffix in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
    },
}


def k8s_quantity(value: Any) -> Fraction | None:
    """The amount the apiserver reads from a JSON value given for a quantity, or None when it
    reads none (a JSON number is read as its text)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        value = repr(value)
    text = str(value)
    match = _K8S_QUANTITY.fullmatch(text)
    if match is None:
        return None
    number = match["number"]
    amount = Fraction(number + "0" if number.endswith(".") else number)
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > 400:
            return None
        amount *= Fraction(10) ** exponent
    else:
        amount *= _SUFFIX_VALUE[match["suffix"] or ""]
    return -amount if match["sign"] == "-" else amount


def is_extended_resource(name: str) -> bool:
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith("requests.")


_NONE = object()


def extended_resource_problems(
    original: Any, patched: Any, location: PodTemplateLocation, governs: Callable[[str], bool]
) -> list[str]:
    problems: list[str] = []
    for kind in ("initContainers", "containers"):
        before_list = _list_at(original, (*location.spec, kind))
        for index, container in enumerate(_list_at(patched, (*location.spec, kind))):
            before = before_list[index] if index < len(before_list) else None
            limits, requests = _amounts(container)
            old_limits, old_requests = _amounts(before)
            for name in sorted({*limits, *requests}):
                if not is_extended_resource(name):
                    continue
                changed = not _same(limits.get(name, _NONE), old_limits.get(name, _NONE))
                changed |= not _same(requests.get(name, _NONE), old_requests.get(name, _NONE))
                if not (governs(name) or changed):
                    continue
                where = f"{kind}[{index}] {name}"
                problems.extend(_resource_problems(where, name, limits, requests))
    return problems


def _same(value: Any, other: Any) -> bool:
    # NaN is not equal to itself, but a patch that leaves it is no change.
    return value is other or value == other


def _resource_problems(
    where: str, name: str, limits: Mapping[str, Any], requests: Mapping[str, Any]
) -> list[str]:
    if name not in limits:
        return [f"{where}: in requests, not in limits (Limit must be set)"]
    limit = k8s_quantity(limits[name])
    if limit is None:
        return [f"{where}: limit {limits[name]!r} is not a quantity"]
    problems = []
    if limit.denominator != 1:
        problems.append(f"{where}: limit {limits[name]!r} must be an integer")
    if limit < 0:
        problems.append(f"{where}: limit {limits[name]!r} must not be negative")
    if name in requests and k8s_quantity(requests[name]) != limit:
        problems.append(
            f"{where}: request {requests[name]!r} must be equal to limit {limits[name]!r}"
        )
    return problems


def _list_at(root: Any, path: tuple[Any, ...]) -> list[Any]:
    found = at(root, path)
    return found if isinstance(found, list) else []


def _amounts(container: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return {}, {}
    limits, requests = resources.get("limits"), resources.get("requests")
    return (
        limits if isinstance(limits, dict) else {},
        requests if isinstance(requests, dict) else {},
    )


# --- messages --------------------------------------------------------------------------------


def _request_line(request: Mapping[str, Any]) -> str:
    kind = request.get("kind")
    return f"{request.get('operation')!r} of {kind!r} (subResource {request.get('subResource')!r})"


def _short(body: bytes, limit: int = 2000) -> str:
    text = body.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _short_json(value: Any, limit: int = 2000) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
