"""Scenario folders (tests/scenarios/README.md) as policy test cases.

A folder holds the request (`review.json`, an AdmissionReview, or `resource.yaml`, a manifest
created in a namespace), `expected.yaml`, and the object the patch must produce
(`mutated.json` or `mutated.yaml`) when a patch is expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from webhook.admission.review import ReviewDecodeError, decode_envelope
from webhook.cli.admit import review_body
from webhook.cli.cases import Expectation, PolicyCase
from webhook.cli.documents import read_one_object, read_text
from webhook.cli.errors import InputError
from webhook.cli.labels import label_problem
from webhook.cli.manifests import DEFAULT_NAMESPACE, NotAManifest, creation_review, read_manifest
from webhook.cli.schemas import EXPECTED_SCHEMA, read_checked_documents
from webhook.engine.evaluate import Mode
from webhook.policy.namespace_labels import StaticNamespaceLabels

REVIEW_FILE = "review.json"
RESOURCE_FILE = "resource.yaml"
EXPECTED_FILE = "expected.yaml"
MUTATED_FILES = ("mutated.json", "mutated.yaml")
POLICY_FOLDER = "policies"


def is_scenario_folder(folder: Path) -> bool:
    return any((folder / name).is_file() for name in (REVIEW_FILE, RESOURCE_FILE))


def load_scenario(folder: Path, root: Path, fallback_policies: Path) -> PolicyCase:
    """The case of `folder`, found under `root` (the directory given on the command line)."""
    expected_file = folder / EXPECTED_FILE
    if not expected_file.is_file():
        raise InputError(f"{folder}: a scenario folder needs {EXPECTED_FILE}")
    documents = read_checked_documents(expected_file, EXPECTED_SCHEMA)
    if len(documents) != 1:
        raise InputError(f"{expected_file}: holds {len(documents)} YAML documents, not one")
    expected = cast(dict[str, Any], documents[0].content)
    review, sent_to = _review(folder, expected.get("namespace"))
    namespace: str = review["request"].get("namespace") or ""
    own_policies = nearest_policies(folder, root)
    return PolicyCase(
        id=f"{folder.parent.name}/{folder.name}",
        source=str(folder),
        review=review,
        endpoint=endpoint_mode(expected.get("endpoint", sent_to), f"{expected_file}: endpoint"),
        policies=own_policies or fallback_policies,
        namespace_labels=_namespace_labels(expected, namespace, expected_file),
        expect=_expectation(folder, expected),
        uses_fallback_policies=own_policies is None,
    )


def endpoint_mode(endpoint: str, where: str) -> Mode:
    """`/mutate?timeout=5s`, `/validate` or `mutate` as the mode it asks for."""
    name = endpoint.partition("?")[0].strip("/")
    if name == "mutate":
        return "mutate"
    if name == "validate":
        return "validate"
    raise InputError(f"{where}: {endpoint!r} is neither /mutate nor /validate")


def nearest_policies(folder: Path, root: Path) -> Path | None:
    """The `policies/` folder nearest above the scenario, looking no higher than `root` (or the
    scenario's group folder, when the scenario itself was given)."""
    folder, root = folder.resolve(), root.resolve()
    top = folder.parent if root == folder else root
    for candidate in (folder, *folder.parents):
        if (candidate / POLICY_FOLDER).is_dir():
            return _relative(candidate / POLICY_FOLDER)
        if candidate == top:
            break
    return None


def _review(folder: Path, namespace: str | None) -> tuple[dict[str, Any], str]:
    """The review to send and the path the capture says it was sent to."""
    review_file, resource_file = folder / REVIEW_FILE, folder / RESOURCE_FILE
    if review_file.is_file() and resource_file.is_file():
        raise InputError(f"{folder}: holds both {REVIEW_FILE} and {RESOURCE_FILE}; keep one")
    if resource_file.is_file():
        found = read_one_object(resource_file)
        try:
            manifest = read_manifest(found.content)
        except NotAManifest as error:
            raise InputError(f"{found.where}: {error}") from None
        chosen = namespace or manifest.namespace or DEFAULT_NAMESPACE
        return creation_review(manifest, chosen), "/mutate"
    text, source = read_text(str(review_file))
    try:
        review = json.loads(text)
    except ValueError as error:
        raise InputError(f"{source}: not valid JSON: {error}") from None
    try:
        decode_envelope(review_body(review) if isinstance(review, dict) else b"[]")
    except ReviewDecodeError as error:
        raise InputError(f"{source}: not an AdmissionReview: {error}") from None
    sent = review.pop("_http", {})
    if namespace is not None:
        review["request"]["namespace"] = namespace
    path = sent.get("path", "/mutate") if isinstance(sent, dict) else "/mutate"
    return review, path


def _namespace_labels(
    expected: dict[str, Any], namespace: str, expected_file: Path
) -> StaticNamespaceLabels:
    labels = expected.get("namespaceLabels")
    if labels is None:
        return StaticNamespaceLabels(reason=f"{EXPECTED_FILE} gives no namespaceLabels")
    problem = label_problem(labels)
    if problem:
        raise InputError(f"{expected_file}: namespaceLabels: {problem}")
    return StaticNamespaceLabels({namespace: labels})


def _expectation(folder: Path, expected: dict[str, Any]) -> Expectation:
    patched: bool = expected.get("patched", False)
    present = [folder / name for name in MUTATED_FILES if (folder / name).is_file()]
    if len(present) > 1:
        raise InputError(f"{folder}: holds both {' and '.join(MUTATED_FILES)}; keep one")
    if patched and not present:
        raise InputError(
            f"{folder}: {EXPECTED_FILE} says patched: true, but there is no "
            f"{' or '.join(MUTATED_FILES)} with the object the patch must produce"
        )
    if present and not patched:
        raise InputError(
            f"{present[0]}: {EXPECTED_FILE} does not say patched: true; add it, or remove this file"
        )
    mutated = read_one_object(present[0]).content if present else None
    return Expectation(
        allowed=expected["allowed"],
        code=expected.get("code"),
        message=tuple(expected.get("message", ())),
        warnings=tuple(expected.get("warnings", ())),
        audit_annotations=dict(expected.get("auditAnnotations", {})),
        policy=expected.get("policy"),
        patched=patched,
        mutated=mutated,
        mutated_source=str(present[0]) if present else "",
        api_version=expected.get("apiVersion"),
    )


def _relative(path: Path) -> Path:
    """`path` relative to the working directory when it is under it, for shorter messages."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path
