"""YAML documents with the line of every field, so that errors can point at it, and the text of
the unquoted values YAML typed, so that errors can quote them as written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from webhook.field_paths import FieldPath, format_field
from webhook.policy.problems import PolicyProblem

# What YAML 1.1 reads an unquoted scalar as besides a string: `Yes`, `1080`, `1.10`,
# `2024-01-01`. (Null is left out: an empty value is a missing one more than a misread one.)
_TYPED_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float", "timestamp")
)


@dataclass(frozen=True)
class SourceDocument:
    """`typed_text`: the text as written of each unquoted value that YAML read as a boolean, a
    number or a date (`Yes`, `1080`, `1.10`), where a message needs more than the value read."""

    file: str
    content: object
    lines: dict[FieldPath, int]
    typed_text: dict[FieldPath, str] = field(default_factory=dict)

    def line_of(self, path: FieldPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def problem(self, path: FieldPath, message: str) -> PolicyProblem:
        return PolicyProblem(self.file, self.line_of(path), format_field(path), message)


# libyaml's parser, when PyYAML was built with it, reads a policy file about ten times faster;
# its error messages say less (a tab is "a character"), so a file it refuses is read again by
# the pure-Python parser for the message.
_FAST_LOADER: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_documents(text: str, file: str) -> list[SourceDocument]:
    """Every non-empty document of a YAML stream.

    Raises `DocumentError` for a syntax error or a key that appears twice in one mapping (which
    a plain YAML load would silently resolve to the last value).
    """
    try:
        return _read_documents(_FAST_LOADER, text, file)
    except yaml.YAMLError as fast_error:
        try:
            _read_documents(yaml.SafeLoader, text, file)
        except yaml.YAMLError as error:
            raise DocumentError(_yaml_problem(error, file, text)) from None
        raise DocumentError(_yaml_problem(fast_error, file, text)) from None


def _read_documents(loader_class: type[Any], text: str, file: str) -> list[SourceDocument]:
    loader = loader_class(text)
    documents: list[SourceDocument] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            lines: dict[FieldPath, int] = {}
            typed_text: dict[FieldPath, str] = {}
            _index_lines(node, (), lines, typed_text, file)
            content = loader.construct_document(node)
            if content is not None:
                documents.append(SourceDocument(file, content, lines, typed_text))
    finally:
        loader.dispose()
    return documents


def _yaml_problem(error: yaml.YAMLError, file: str, text: str) -> PolicyProblem:
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        return PolicyProblem(file, line, "(yaml)", _describe(error))
    if isinstance(error, yaml.reader.ReaderError):
        # A character YAML does not allow anywhere: found before any parsing, with no mark.
        line = text.count("\n", 0, error.position) + 1
        character = error.character
        code = character if isinstance(character, int) else ord(character)
        return PolicyProblem(file, line, "(yaml)", f"invalid YAML: {error.reason} (#x{code:x})")
    return PolicyProblem(file, None, "(yaml)", f"invalid YAML: {error}")


class DocumentError(ValueError):
    def __init__(self, problem: PolicyProblem) -> None:
        self.problem = problem
        super().__init__(str(problem))


def _describe(error: yaml.MarkedYAMLError) -> str:
    parts = [part for part in (error.context, error.problem) if part]
    return "invalid YAML: " + ", ".join(parts)


def _index_lines(
    node: yaml.Node,
    path: FieldPath,
    lines: dict[FieldPath, int],
    typed_text: dict[FieldPath, str],
    file: str,
) -> None:
    lines[path] = node.start_mark.line + 1
    # A plain scalar has no style: None from PyYAML's parser, "" from libyaml's.
    if isinstance(node, yaml.ScalarNode) and not node.style and node.tag in _TYPED_TAGS:
        typed_text[path] = node.value
    elif isinstance(node, yaml.MappingNode):
        seen: set[object] = set()
        for key_node, value_node in node.value:
            if key_node.tag != "tag:yaml.org,2002:str":
                raise DocumentError(
                    PolicyProblem(
                        file,
                        key_node.start_mark.line + 1,
                        format_field(path),
                        "keys must be strings (quote them)",
                    )
                )
            key = key_node.value
            if key in seen:
                raise DocumentError(
                    PolicyProblem(
                        file,
                        key_node.start_mark.line + 1,
                        format_field((*path, key)),
                        "this key appears twice in the same mapping",
                    )
                )
            seen.add(key)
            _index_lines(value_node, (*path, key), lines, typed_text, file)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_lines(item, (*path, index), lines, typed_text, file)
