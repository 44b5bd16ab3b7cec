"""The JSON Schemas of the test formats, and their errors as problems that name the file, the
line and the field."""

from __future__ import annotations

from pathlib import Path

from webhook.cli.documents import read_text
from webhook.cli.errors import InputError
from webhook.policy.schema_problems import schema_problems, schema_validator
from webhook.policy.yaml_documents import DocumentError, SourceDocument, read_documents

SUITE_SCHEMA = "gpupolicytest-v1alpha1.schema.json"
EXPECTED_SCHEMA = "scenario-expected.schema.json"


def read_checked_documents(path: Path, schema: str) -> list[SourceDocument]:
    """The YAML documents of `path`, each valid under `schema`; InputError with every problem."""
    text, source = read_text(str(path))
    try:
        documents = read_documents(text, source)
    except DocumentError as error:
        raise InputError(str(error.problem)) from None
    if not documents:
        raise InputError(f"{source}: holds no YAML document")
    validator = schema_validator(Path(__file__).with_name(schema))
    problems = [
        problem for document in documents for problem in schema_problems(document, validator)
    ]
    if problems:
        raise InputError(str(problem) for problem in problems)
    return documents
