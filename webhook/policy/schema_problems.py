"""JSON Schema errors as problems that name the file, the line and the field: one wording for
policies and for the test formats alike."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from webhook.field_paths import FieldPath
from webhook.policy.problems import PolicyProblem
from webhook.policy.yaml_documents import SourceDocument


@cache
def schema_validator(path: Path) -> jsonschema.protocols.Validator:
    schema = json.loads(path.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def schema_problems(
    document: SourceDocument, validator: jsonschema.protocols.Validator
) -> list[PolicyProblem]:
    """What in `document` the schema rejects, in line order; unknown fields are named."""
    problems: list[PolicyProblem] = []
    reported: set[FieldPath] = set()
    content: Any = document.content
    for error in _branch_errors(validator.iter_errors(content)):
        path: FieldPath = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            schema = error.schema if isinstance(error.schema, Mapping) else {}
            known = sorted(schema.get("properties", {}))
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
            required: Any = error.validator_value
            for key in required:
                if key not in error.instance and (*path, key) not in reported:
                    reported.add((*path, key))
                    problems.append(document.problem((*path, key), "is required"))
        else:
            problems.append(document.problem(path, _message(error)))
    return sorted(problems, key=lambda problem: problem.line or 0)


def _branch_errors(
    errors: Iterable[jsonschema.ValidationError],
) -> Iterator[jsonschema.ValidationError]:
    """Errors as they are, except that where a value matches none of a `oneOf`'s forms (a
    model named, or written whole), the errors of the form it was meant to take stand in."""
    for error in errors:
        if error.validator != "oneOf" or not error.context:
            yield error
            continue
        # The form of the value's own type: an object is an entry, a string a name.
        meant = [
            sub
            for sub in error.context
            if not (
                sub.validator == "type" and list(sub.relative_schema_path)[1:-1] in ([], ["$ref"])
            )
        ]
        branches = {sub.relative_schema_path[0] for sub in meant}
        if len(branches) == 1:
            yield from _branch_errors(meant)
        else:
            yield error


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "const":
        return f"must be {error.validator_value!r}, not {error.instance!r}"
    if error.validator == "enum":
        values: Any = error.validator_value
        choices = ", ".join(repr(choice) for choice in values)
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
