"""The command line run in-process, as tests call it: its exit code and what it printed."""

from __future__ import annotations

import io
from dataclasses import dataclass

from webhook.cli.main import main


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def webhook(*args: str, stdin: str = "") -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return Run(code, out.getvalue(), err.getvalue())
