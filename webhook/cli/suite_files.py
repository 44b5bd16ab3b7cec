"""GPUPolicyTest suite files (`gpu-test.yaml`, docs/policy-testing.md) as policy test cases."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from webhook.cli.cases import Expectation, PolicyCase
from webhook.cli.documents import InputObject, read_objects, read_one_object, read_text
from webhook.cli.errors import InputError
from webhook.cli.labels import label_problem
from webhook.cli.manifests import (
    DEFAULT_NAMESPACE,
    Manifest,
    NotAManifest,
    creation_review,
    read_manifest,
)
from webhook.cli.schemas import SUITE_SCHEMA, read_checked_documents
from webhook.field_paths import FieldPath
from webhook.policy.namespace_labels import StaticNamespaceLabels
from webhook.policy.yaml_documents import SourceDocument

SUITE_FILE = "gpu-test.yaml"


def load_suite_file(path: Path) -> list[PolicyCase]:
    """The cases of every GPUPolicyTest document in `path`; InputError with every problem."""
    cases: list[PolicyCase] = []
    problems: list[str] = []
    for document in read_checked_documents(path, SUITE_SCHEMA):
        loader = _SuiteLoader(path, document)
        cases.extend(loader.cases())
        problems.extend(loader.problems)
    if problems:
        raise InputError(problems)
    return cases


@dataclass(frozen=True)
class _Found:
    manifest: Manifest
    where: str


class _SuiteLoader:
    """Reads one schema-valid suite document, collecting the problems a schema cannot see."""

    def __init__(self, path: Path, document: SourceDocument) -> None:
        self.path = path
        self.base = path.parent
        self.document = document
        self.content = cast(dict[str, Any], document.content)
        self.problems: list[str] = []

    def report(self, path: FieldPath, message: str) -> None:
        self.problems.append(str(self.document.problem(path, message)))

    def cases(self) -> list[PolicyCase]:
        suite = self.content["metadata"]["name"]
        policies = self._policies()
        manifests = self._manifests()
        labels = self._namespace_labels()
        cases: list[PolicyCase] = []
        ids: set[str] = set()
        for index, result in enumerate(self.content["results"]):
            found = self._manifest_for(index, result, manifests)
            expectation = self._expectation(index, result)
            if found is None or expectation is None:
                continue
            endpoint = result.get("endpoint", "mutate")
            case_id = _unique(_case_id(suite, result), ids)
            namespace = result.get("namespace") or found.manifest.namespace or DEFAULT_NAMESPACE
            cases.append(
                PolicyCase(
                    id=case_id,
                    source=f"{self.path}:{self.document.line_of(('results', index))}",
                    review=creation_review(found.manifest, namespace),
                    endpoint=endpoint,
                    policies=policies,
                    namespace_labels=labels,
                    expect=expectation,
                )
            )
        return cases

    def _relative(self, name: str) -> Path:
        return Path(os.path.normpath(self.base / name))

    def _policies(self) -> Path:
        directory = self._relative(self.content["policies"])
        if not directory.is_dir():
            self.report(("policies",), f"{directory} is not a directory")
        return directory

    def _manifests(self) -> list[_Found]:
        found: list[_Found] = []
        for index, name in enumerate(self.content["resources"]):
            try:
                text, source = read_text(str(self._relative(name)))
            except InputError as error:
                self.report(("resources", index), "; ".join(error.lines))
                continue
            try:
                objects = read_objects(text, source)
            except InputError as error:
                self.problems.extend(error.lines)
                continue
            if not objects:
                self.report(("resources", index), f"{source} holds no manifests")
            found.extend(
                manifest for manifest in map(self._manifest, objects) if manifest is not None
            )
        return found

    def _manifest(self, item: InputObject) -> _Found | None:
        try:
            manifest = read_manifest(item.content)
        except NotAManifest as error:
            self.problems.append(f"{item.where}: {error}")
            return None
        if not manifest.name:
            self.problems.append(f"{item.where}: a manifest in a suite needs metadata.name")
            return None
        return _Found(manifest, item.where)

    def _namespace_labels(self) -> StaticNamespaceLabels:
        namespaces: Mapping[str, Mapping[str, str]] = self.content.get("namespaces", {})
        for namespace, labels in namespaces.items():
            problem = label_problem(labels)
            if problem:
                self.report(("namespaces", namespace), problem)
        return StaticNamespaceLabels(
            labels=namespaces, reason=f"not listed under namespaces: in {self.path.name}"
        )

    def _manifest_for(
        self, index: int, result: Mapping[str, Any], manifests: list[_Found]
    ) -> _Found | None:
        name, kind = result["resource"], result.get("kind")
        named = [item for item in manifests if item.manifest.name == name]
        matching = [item for item in named if kind is None or item.manifest.kind == kind]
        if len(matching) == 1:
            return matching[0]
        field = ("results", index, "resource")
        if not matching:
            kinds = f" of kind {kind}" if kind else ""
            known = sorted({f"{item.manifest.kind}/{item.manifest.name}" for item in manifests})
            self.report(
                field,
                f"no manifest{kinds} in resources is named {name!r} "
                f"(there are: {', '.join(known) or 'none'})",
            )
        else:
            places = ", ".join(f"{item.manifest.kind} at {item.where}" for item in matching)
            hint = "rename one" if kind else "add kind: to choose"
            self.report(field, f"{len(matching)} manifests are named {name!r} ({places}); {hint}")
        return None

    def _expectation(self, index: int, result: Mapping[str, Any]) -> Expectation | None:
        at = ("results", index)
        allowed: bool = result["allowed"]
        patched: bool = result.get("patched", "patchedResource" in result)
        problems_before = len(self.problems)
        if allowed and ("message" in result or "code" in result):
            self.report((*at, "message" if "message" in result else "code"), "is for denials")
        if not allowed and patched:
            self.report((*at, "allowed"), "a denied object is never patched")
        if not patched and "patchedResource" in result:
            self.report((*at, "patched"), "patched: false, but a patchedResource is given")
        if patched and result.get("endpoint") == "validate":
            self.report((*at, "endpoint"), "/validate never patches")
        mutated, mutated_source = None, ""
        if "patchedResource" in result:
            location = self._relative(result["patchedResource"])
            try:
                mutated = read_one_object(location).content
                mutated_source = str(location)
            except InputError as error:
                self.report((*at, "patchedResource"), "; ".join(error.lines))
        if len(self.problems) > problems_before:
            return None
        return Expectation(
            allowed=allowed,
            code=result.get("code"),
            message=tuple(result.get("message", ())),
            warnings=tuple(result.get("warnings", ())),
            audit_annotations=dict(result.get("auditAnnotations", {})),
            policy=result.get("policy"),
            patched=patched,
            mutated=mutated,
            mutated_source=mutated_source,
        )


def _case_id(suite: str, result: Mapping[str, Any]) -> str:
    """`suite/resource`, with the namespace before the resource when the result sets one and
    `/validate` after it for that endpoint."""
    parts = [suite, result.get("namespace"), result["resource"]]
    if result.get("endpoint") == "validate":
        parts.append("validate")
    return "/".join(part for part in parts if part)


def _unique(case_id: str, taken: set[str]) -> str:
    candidate, number = case_id, 2
    while candidate in taken:
        candidate = f"{case_id}#{number}"
        number += 1
    taken.add(candidate)
    return candidate
