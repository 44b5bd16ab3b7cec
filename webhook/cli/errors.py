"""The one kind of failure the commands expect: bad input, reported without a traceback."""

from __future__ import annotations

from collections.abc import Iterable

USAGE_ERROR = 2


class InputError(Exception):
    """Input the command cannot work with: an unreadable file, a document of the wrong shape, a
    policy directory that does not load. Each line is printed on stderr and the command exits 2.
    """

    def __init__(self, lines: str | Iterable[str]) -> None:
        self.lines = (lines,) if isinstance(lines, str) else tuple(lines)
        super().__init__("\n".join(self.lines))
