"""The JSON Schemas of the test formats, and their errors as problems that name the file, the
line and the field."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from webhook.cli.documents import read_text
from webhook.cli.errors import InputError
from webhook.field_paths import FieldPath
from webhook.policy.problems import PolicyProblem
from webhook.policy.yaml_documents import DocumentError, SourceDocument, read_documents

SUITE_SCHEMA = "gpupolicytest-v1alpha1.schema.json"
EXPECTED_SCHEMA = "scenario-expected.schema.json"


@cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads(Path(__file__).with_name(name).read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def read_checked_documents(path: Path, schema: str) -> list[SourceDocument]:
    """The YAML documents of `path`, each valid under `schema`; InputError with every problem."""
    text, source = read_text(str(path))
    try:
        documents = read_documents(text, source)
    except DocumentError as error:
        raise InputError(str(error.problem)) from None
    if not documents:
        raise InputError(f"{source}: holds no YAML document")
    problems = [problem for document in documents for problem in schema_problems(document, schema)]
    if problems:
        raise InputError(str(problem) for problem in problems)
    return documents


def schema_problems(document: SourceDocument, schema: str) -> list[PolicyProblem]:
    """What in `document` the schema rejects, in line order; unknown fields are named."""
    problems: list[PolicyProblem] = []
    reported: set[FieldPath] = set()
    for error in _validator(schema).iter_errors(document.content):
        path: FieldPath = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = sorted(error.schema.get("properties", {}))
            if not known:
                problems.append(document.problem(path, _message(error)))
                continue
            for key in sorted(set(error.instance) - set(known), key=str):
                problems.append(
                    document.problem(
                        (*path, key), f"unknown field (known here: {', '.join(known)})"
                    )
                )
        elif error.validator == "required" and isinstance(error.instance, dict):
            for key in error.validator_value:
                if key not in error.instance and (*path, key) not in reported:
                    reported.add((*path, key))
                    problems.append(document.problem((*path, key), "is required"))
        else:
            problems.append(document.problem(path, _message(error)))
    return sorted(problems, key=lambda problem: problem.line or 0)


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "const":
        return f"must be {error.validator_value!r}, not {error.instance!r}"
    if error.validator == "enum":
        choices = ", ".join(repr(choice) for choice in error.validator_value)
        return f"{error.instance!r} is not one of {choices}"
    if error.validator == "type":
        return f"must be of type {error.validator_value}, not {_type_name(error.instance)}"
    if error.validator in ("minItems", "minLength"):
        return "must not be empty"
    return error.message


def _type_name(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
    if value is None:
        return "null"
    return names.get(type(value), "object" if isinstance(value, dict) else type(value).__name__)
