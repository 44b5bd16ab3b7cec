"""`webhook review`: what the webhook does to the objects of a file, without a cluster.

The verdicts go to stderr and the objects (or their diffs) to stdout, so that the output can be
piped or saved while the verdicts stay on the terminal. Kinds the webhook does not judge (a
Service, a ConfigMap) pass through as they are, in their place, with a note on stderr, so that
`kustomize build . | gpu-admission review -f - | kubectl apply -f -` works on a whole app.

It fails closed: when one object is denied (with `--strict`, also one a Warn or Audit policy
would deny), no object goes to stdout, so the pipe above applies nothing and fails, rather
than applying the app without the denied part. `-o json` prints a List whose `verdicts` say
what became of each object in input order, and whose `items` are empty then. A `--diff`,
which is read and never applied, shows the changes of the objects admitted all the same.
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
    # A would-deny under a Warn or Audit policy counts as a denial (for CI).
    strict: bool = False


@dataclass(frozen=True)
class _Submission:
    """An object to review (`body`, its AdmissionReview), or one that passes through."""

    where: str
    body: bytes = b""
    passthrough: Any = None
    note: str = ""


def run_review(options: ReviewOptions, *, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """Reviews every object of the file: 0 when all are allowed, 1 when one is denied (or,
    with `strict`, would be), and then nothing goes to stdout but the JSON verdicts."""
    policies = load_policy_set(options.policies)
    text, source = read_text(options.file, stdin)
    objects = read_objects(text, source)
    if not objects:
        raise InputError(f"{source}: holds no objects")
    submissions = _submissions(objects, options.namespace)
    labels = _label_source(options.namespace_labels)
    admitted_objects: list[tuple[str, Any, Any]] = []
    verdicts: list[dict[str, Any]] = []
    # The companions already printed, by namespace and name: each goes out once, before the
    # first object that needs it.
    made: set[tuple[str, str]] = set()
    for submission in submissions:
        if submission.note:
            # A kind the webhook does not judge: emitted as written, in its place.
            _write(stderr, f"{submission.where}: {submission.note}\n")
            verdicts.append(_passed_through(submission))
            admitted_objects.append(
                (submission.where, submission.passthrough, submission.passthrough)
            )
            continue
        admission = admit(submission.body, policies, options.mode, labels)
        original = admission.envelope.request.get("object")
        admitted = _patched(original, admission.verdict.patch, submission.where)
        _write(stderr, _report(submission.where, admission))
        verdicts.append(_verdict(submission.where, admission))
        if admission.verdict.allowed and original is not None:
            for companion in _new_companions(admission, made):
                admitted_objects.append((submission.where, None, companion))
            admitted_objects.append((submission.where, original, admitted))
    refused = [v for v in verdicts if _refuses(v["verdict"], options.strict)]
    if refused and not options.diff:
        noun = "object" if len(refused) == 1 else "objects"
        _write(stderr, f"{len(refused)} {noun} refused: nothing is printed to apply\n")
    if options.diff:
        # A diff is read, never applied: the admitted objects' changes are shown all the same.
        _write(stdout, _diffs(admitted_objects, options))
    elif options.output == "json":
        items = [] if refused else [admitted for _, _, admitted in admitted_objects]
        listed = {
            "apiVersion": "v1",
            "kind": "List",
            "items": items,
            "verdicts": verdicts,
            "refused": len(refused),
        }
        _write(stdout, dump(listed, "json"))
    elif not refused:
        _write(stdout, "---\n".join(dump(obj, options.output) for _, _, obj in admitted_objects))
    return 1 if refused else 0


def _new_companions(admission: Admission, made: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """The objects this admitted object needs in its namespace that were not printed yet (a
    DRA share's ResourceClaimTemplate), in that namespace: the server makes them itself."""
    request = admission.request
    namespace = request.namespace if request is not None else ""
    found = []
    for companion in admission.verdict.companions:
        name = companion["metadata"]["name"]
        if (namespace, name) in made:
            continue
        made.add((namespace, name))
        metadata = dict(companion["metadata"])
        if namespace:
            metadata = {"name": name, "namespace": namespace, **metadata}
        found.append({**companion, "metadata": metadata})
    return found


def _refuses(verdict: str, strict: bool) -> bool:
    return verdict == "denied" or (strict and verdict == "would-deny")


def _diffs(admitted_objects: Sequence[tuple[str, Any, Any]], options: ReviewOptions) -> str:
    return "".join(
        line + "\n"
        for where, original, admitted in admitted_objects
        for line in unified_diff(
            original,
            admitted,
            options.output,
            before_name=f"{where} (as written)" if original is not None else "/dev/null",
            after_name=f"{where} (as admitted)" if original is not None else _named(admitted),
        )
    )


def _named(companion: Mapping[str, Any]) -> str:
    metadata = companion["metadata"]
    namespace = metadata.get("namespace")
    name = f"{namespace}/{metadata['name']}" if namespace else metadata["name"]
    return f"{companion['kind']} {name} (made beside it)"


def _passed_through(submission: _Submission) -> dict[str, Any]:
    content = submission.passthrough
    metadata = content.get("metadata") or {} if isinstance(content, dict) else {}
    return {
        "source": submission.where,
        "kind": content.get("kind", "") if isinstance(content, dict) else "",
        "namespace": metadata.get("namespace", ""),
        "name": metadata.get("name", ""),
        "verdict": "not-judged",
        "message": submission.note,
        "policy": "",
        "warnings": [],
        "needs": [],
    }


def _verdict(where: str, admission: Admission) -> dict[str, Any]:
    """What became of one object, for `-o json`: allowed (unchanged), patched, denied, or
    would-deny (allowed by a Warn or Audit policy that would deny it under Enforce)."""
    verdict = admission.verdict
    audit = verdict.audit_annotations
    request = admission.request
    if not verdict.allowed:
        said, message = "denied", verdict.message
    elif audit.get(WOULD_DENY):
        said, message = "would-deny", f"({audit.get(ENFORCEMENT, '')}) {audit[WOULD_DENY]}"
    else:
        said, message = ("patched" if verdict.patch else "allowed"), ""
    return {
        "source": where,
        "kind": request.kind if request is not None else "",
        "namespace": request.namespace if request is not None else "",
        "name": request.name if request is not None else "",
        "verdict": said,
        "message": message,
        "policy": audit.get("policy", ""),
        "warnings": list(verdict.warnings),
        "needs": [
            f"{companion['kind']} {companion['metadata']['name']}"
            for companion in verdict.companions
        ],
    }


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
    for companion in verdict.companions:
        # Made by the server before it admits the object; printed here before it.
        lines.append(f"  needs:   {companion['kind']} {companion['metadata']['name']}")
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
