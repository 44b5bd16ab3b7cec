"""`webhook review`: what the webhook does to the objects of a file, without a cluster.

The verdicts go to stderr and the objects (or their diffs) to stdout, so that the output can be
piped or saved while the verdicts stay on the terminal. Kinds the webhook does not judge (a
Service, a ConfigMap) pass through as they are, in their place, with a note on stderr, so that
`kustomize build . | gpu-admission review -f - | kubectl apply -f -` works on a whole app.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import jsonpatch
import jsonpointer

from webhook.admission.decide import ENFORCEMENT, WOULD_DENY
from webhook.admission.review import ReviewDecodeError, decode_envelope
from webhook.cli.admit import Admission, admit, review_body
from webhook.cli.documents import InputObject, read_objects, read_text
from webhook.cli.errors import InputError
from webhook.cli.manifests import (
    DEFAULT_NAMESPACE,
    NotAManifest,
    creation_review,
    is_admission_review,
    read_manifest,
)
from webhook.cli.policies import load_policy_set
from webhook.cli.render import OutputFormat, dump, unified_diff
from webhook.engine.evaluate import Mode
from webhook.policy.namespace_labels import NamespaceLabelSource, StaticNamespaceLabels


@dataclass(frozen=True)
class ReviewOptions:
    file: str
    policies: Path
    mode: Mode = "mutate"
    namespace: str | None = None
    namespace_labels: Mapping[str, str] | None = None
    output: OutputFormat = "yaml"
    diff: bool = False


@dataclass(frozen=True)
class _Submission:
    """An object to review (`body`, its AdmissionReview), or one that passes through."""

    where: str
    body: bytes = b""
    passthrough: Any = None
    note: str = ""


def run_review(options: ReviewOptions, *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """Reviews every object of the file: 0 when all are allowed, 1 when one is denied."""
    policies = load_policy_set(options.policies)
    text, source = read_text(options.file, stdin)
    objects = read_objects(text, source)
    if not objects:
        raise InputError(f"{source}: holds no objects")
    submissions = _submissions(objects, options.namespace)
    labels = _label_source(options.namespace_labels)
    several = len(submissions) > 1
    listed: list[Any] = []
    printed = 0
    exit_code = 0
    for submission in submissions:
        if submission.note:
            # A kind the webhook does not judge: emitted as written, in its place.
            _write(stderr, f"{submission.where}: {submission.note}\n")
            original = admitted = submission.passthrough
        else:
            admission = admit(submission.body, policies, options.mode, labels)
            original = admission.envelope.request.get("object")
            admitted = _patched(original, admission.verdict.patch, submission.where)
            _write(stderr, _report(submission.where, admission))
            if not admission.verdict.allowed:
                exit_code = 1
                continue
            if original is None:
                continue
        if options.diff:
            lines = unified_diff(
                original,
                admitted,
                options.output,
                before_name=f"{submission.where} (as written)",
                after_name=f"{submission.where} (as admitted)",
            )
            _write(stdout, "".join(line + "\n" for line in lines))
        elif options.output == "json" and several:
            listed.append(admitted)
        else:
            _write(stdout, ("---\n" if printed else "") + dump(admitted, options.output))
            printed += 1
    if listed:
        _write(stdout, dump({"apiVersion": "v1", "kind": "List", "items": listed}, "json"))
    return exit_code


def _submissions(objects: Sequence[InputObject], namespace: str | None) -> list[_Submission]:
    """Every object as the AdmissionReview to answer, or InputError naming each one that
    cannot be reviewed; nothing is reviewed unless all of them can be."""
    submissions: list[_Submission] = []
    problems: list[str] = []
    for found in objects:
        try:
            submissions.append(_submission(found, namespace))
        except InputError as error:
            problems.extend(error.lines)
    if problems:
        raise InputError(problems)
    return submissions


def _submission(found: InputObject, namespace: str | None) -> _Submission:
    if is_admission_review(found.content):
        if namespace is not None:
            raise InputError(
                f"{found.where}: --namespace applies to manifests; "
                "an AdmissionReview carries its own request.namespace"
            )
        body = review_body(found.content)
    else:
        try:
            manifest = read_manifest(found.content)
        except NotAManifest as error:
            raise InputError(f"{found.where}: {error}") from None
        if not manifest.handled:
            api_version = found.content["apiVersion"]
            note = f"{manifest.kind} ({api_version}) passes through: not a kind the webhook judges"
            return _Submission(found.where, passthrough=found.content, note=note)
        chosen = namespace or manifest.namespace or DEFAULT_NAMESPACE
        body = review_body(creation_review(manifest, chosen))
    try:
        decode_envelope(body)
    except ReviewDecodeError as error:
        message = f"{found.where}: not an AdmissionReview the webhook answers: {error}"
        raise InputError(message) from None
    return _Submission(found.where, body)


def _label_source(labels: Mapping[str, str] | None) -> NamespaceLabelSource:
    if labels is None:
        return StaticNamespaceLabels(reason="no --namespace-labels were given")
    return StaticNamespaceLabels(others=labels)


def _patched(original: Any, patch: Sequence[Mapping[str, Any]], where: str) -> Any:
    if not patch:
        return original
    try:
        return jsonpatch.apply_patch(original, list(patch))
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
        raise InputError(f"{where}: the webhook's patch does not apply: {error}") from None


def _report(where: str, admission: Admission) -> str:
    verdict = admission.verdict
    lines = [_title(where, admission)]
    if verdict.allowed:
        count = len(verdict.patch)
        done = f"patched ({count} operation{'s' if count != 1 else ''})" if count else "unchanged"
        lines.append(f"  verdict: allowed, {done}")
        would_deny = verdict.audit_annotations.get(WOULD_DENY)
        if would_deny:
            mode = verdict.audit_annotations.get(ENFORCEMENT, "")
            lines.append(f"  would deny ({mode}): {would_deny}")
    else:
        lines.append(f"  verdict: denied, {verdict.code} {verdict.reason}")
        lines.append(f"  message: {verdict.message}")
    policy = verdict.audit_annotations.get("policy")
    if policy:
        lines.append(f"  policy:  {policy}")
    lines.extend(f"  warning: {warning}" for warning in verdict.warnings)
    return "\n".join(lines) + "\n"


def _title(where: str, admission: Admission) -> str:
    request = admission.request
    if request is None:
        return where
    name = request.name or "(no name)"
    if request.namespace:
        name = f"{request.namespace}/{name}"
    return f"{request.operation} {request.kind} {name} ({where})"


def _write(stream: TextIO, text: str) -> None:
    if text:
        stream.write(text)
        stream.flush()
