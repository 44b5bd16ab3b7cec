"""Objects and differences between them, as text for people."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Literal

import yaml

OutputFormat = Literal["yaml", "json"]
# JSON's escape \\ud800 decodes to a lone surrogate, which no UTF-8 stream can write: JSON
# output writes it back as that escape. (YAML's emitter escapes it itself.)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _IndentedDumper(yaml.SafeDumper):
    """Indents list items under their key, as kubectl prints them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def dump(obj: Any, output: OutputFormat, *, sort_keys: bool = False) -> str:
    """`obj` as YAML or JSON text ending in a newline."""
    if output == "json":
        text = json.dumps(obj, indent=2, sort_keys=sort_keys, ensure_ascii=False)
        return _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found[0]):04x}", text) + "\n"
    return yaml.dump(
        obj,
        Dumper=_IndentedDumper,
        sort_keys=sort_keys,
        default_flow_style=False,
        allow_unicode=True,
        width=2**16,  # long annotation values stay on one line
    )


def unified_diff(
    before: Any,
    after: Any,
    output: OutputFormat,
    *,
    before_name: str,
    after_name: str,
    sort_keys: bool = False,
) -> list[str]:
    """The lines of a unified diff between two objects, empty when they are equal; `before`
    None: an object made anew, every line of it added."""
    return list(
        difflib.unified_diff(
            [] if before is None else dump(before, output, sort_keys=sort_keys).splitlines(),
            dump(after, output, sort_keys=sort_keys).splitlines(),
            before_name,
            after_name,
            lineterm="",
        )
    )
