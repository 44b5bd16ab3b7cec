"""JSON Schema errors as problems that name the file, the line and the field: one wording for
policies and for the test formats alike.

Where the schema wanted a string and YAML 1.1 read an unquoted value as something else
(`multiGPU: Yes` as true, `product: 1080` as a number), the problem names the value as written
and what to write: "True is not one of 'Skip', 'Sum'" would name a value nobody wrote.
"""

from __future__ import annotations

import datetime
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
                problems.append(document.problem(path, _message(error, None)))
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
            written = document.typed_text.get(path)
            problems.append(document.problem(path, _message(error, written)))
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


def _message(error: jsonschema.ValidationError, written: str | None) -> str:
    """`written`: the value's text in the file, where YAML read it as other than a string."""
    misread = _misread(error, written) if written is not None else None
    if misread is not None:
        return misread
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


def _misread(error: jsonschema.ValidationError, written: str) -> str | None:
    """What to say of a value YAML typed where a string was wanted; None where none was."""
    fix = _fix(error, written)
    if fix is None:
        return None
    read_as = _reading(error.instance)
    return f'{written} is read by YAML as {read_as}, not the string "{written}": {fix}'


def _fix(error: jsonschema.ValidationError, written: str) -> str | None:
    """What to write instead of a value YAML typed; None where the schema wants no string."""
    quote = f'quote it ("{written}")'
    wanted: Any = error.validator_value
    if error.validator == "type":
        return quote if "string" in ([wanted] if isinstance(wanted, str) else wanted) else None
    if error.validator == "enum" and any(isinstance(choice, str) for choice in wanted):
        choices = ", ".join(repr(choice) for choice in wanted)
        return quote if written in wanted else f"write one of {choices}"
    if error.validator == "const" and isinstance(wanted, str):
        return quote if written == wanted else f"write {wanted!r}"
    if error.validator in ("oneOf", "anyOf"):
        # The forms that take a string (a model named rather than written whole) are the ones
        # meant; the value's other forms fail on its type alone.
        fixes = [
            fix
            for sub in error.context or ()
            if not sub.relative_path and (fix := _fix(sub, written)) is not None
        ]
        return quote if quote in fixes else next(iter(fixes), None)
    return None


def _reading(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, datetime.date):
        return f"the {'timestamp' if isinstance(value, datetime.datetime) else 'date'} {value}"
    return f"a {_type_name(value)}"
