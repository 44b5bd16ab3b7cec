"""Reading the objects of a YAML or JSON file, each with the place it came from."""

from __future__ import annotations

import base64
import datetime
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from webhook.cli.errors import InputError
from webhook.policy.yaml_documents import DocumentError, read_documents

STDIN = "-"


@dataclass(frozen=True)
class InputObject:
    """One object of a file: a document, or an item of a `kind: List` document."""

    source: str
    line: int | None
    content: Any

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source


def read_text(path: str, stdin: TextIO | None = None) -> tuple[str, str]:
    """The text of `path` (`-` for stdin) and the name to show for it in messages."""
    if path == STDIN:
        stream = stdin if stdin is not None else sys.stdin
        try:
            return stream.read(), "<stdin>"
        except UnicodeDecodeError as error:
            raise InputError(f"<stdin>: not UTF-8 text: {error}") from None
    try:
        return Path(path).read_text(encoding="utf-8"), path
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text: {error}") from None
    except OSError as error:
        raise InputError(f"{path}: cannot be read: {error.strerror}") from None


def read_objects(text: str, source: str) -> list[InputObject]:
    """Every object in `text`: JSON, or a YAML stream of one or more documents. A `kind: List`
    document (what `kubectl get -o yaml` prints) stands for its items."""
    if source.endswith(".json") or text.lstrip().startswith(("{", "[")):
        try:
            content = json.loads(text)
        except ValueError as error:
            if source.endswith(".json"):
                raise InputError(f"{source}: not valid JSON: {error}") from None
        else:
            return _expand(InputObject(source, None, content), {})
    try:
        documents = read_documents(text, source)
    except DocumentError as error:
        raise InputError(str(error.problem)) from None
    objects: list[InputObject] = []
    for document in documents:
        found = InputObject(source, document.line_of(()), _plain(document.content))
        objects.extend(_expand(found, document.lines))
    return objects


def read_one_object(path: Path) -> InputObject:
    text, source = read_text(str(path))
    objects = read_objects(text, source)
    if len(objects) != 1:
        raise InputError(f"{source}: holds {len(objects)} objects, not one")
    return objects[0]


# Lists in Lists, as kubectl flattens them: deeper than this is no manifest.
_MAX_LIST_DEPTH = 16


def _expand(
    found: InputObject, lines: dict[Any, int], path: tuple[Any, ...] = ()
) -> list[InputObject]:
    """The objects of a document: itself, or the items of a `kind: List`, Lists in it
    opened too (kubectl applies their items, so each is reviewed)."""
    content = found.content
    if not (isinstance(content, dict) and _is_list_kind(content)):
        return [found]
    items = content.get("items")
    if not isinstance(items, list):
        raise InputError(f"{found.where}: a {content['kind']} needs a list of items")
    if len(path) >= 2 * _MAX_LIST_DEPTH:
        raise InputError(f"{found.where}: Lists nested more than {_MAX_LIST_DEPTH} deep")
    expanded: list[InputObject] = []
    for index, item in enumerate(items):
        item_path = (*path, "items", index)
        line = lines.get(item_path, found.line)
        expanded += _expand(InputObject(found.source, line, item), lines, item_path)
    return expanded


def _is_list_kind(content: dict[str, Any]) -> bool:
    kind = content.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and "items" in content


def _plain(value: Any) -> Any:
    """`value` as JSON holds it: YAML timestamps and binaries become the strings a Kubernetes
    client sends (an unquoted `creationTimestamp: 2024-01-01T00:00:00Z` is a datetime to PyYAML)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, datetime.datetime):
        text = value.isoformat()
        return text[: -len("+00:00")] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value
