"""The serving edge's lines of code, piece by piece: what bench/README.md sets beside the figure
each piece buys. `python -m bench.edge_lines` prints them; tests/unit/test_bench.py checks that
the README's table says what the code is.

A line of code is a line with a token on it that is neither a comment nor part of a docstring;
blank lines do not count.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
EDGE = REPO_ROOT / "webhook" / "server" / "edge"
# Each piece of the edge, by the files that make it.
PIECES: dict[str, tuple[str, ...]] = {
    "the worker (kept-alive connections served on one thread, balanced between workers)": (
        "worker.py",
        "connection_table.py",
    ),
    "the evented front (handshakes and request reads off the pool threads)": (
        "front.py",
        "request_framing.py",
    ),
    "stall limits on TLS reads and writes": ("stall_limited_tls.py",),
    "the TLS context kept per worker": ("tls_context.py",),
    "the door to the app": ("served_app.py", "__init__.py"),
}
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def code_lines(path: Path) -> int:
    source = path.read_text(encoding="utf-8")
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in _SKIPPED or token.type == tokenize.ENDMARKER:
            continue
        lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return len(lines)


def piece_lines() -> dict[str, int]:
    """Each piece's lines of code; every file of the edge is in exactly one piece."""
    files = {path.name for path in EDGE.glob("*.py")}
    listed = [name for names in PIECES.values() for name in names]
    if sorted(listed) != sorted(files):
        raise ValueError(f"the edge's files {sorted(files)} are not the pieces' {sorted(listed)}")
    return {piece: sum(code_lines(EDGE / n) for n in names) for piece, names in PIECES.items()}


def main() -> int:
    found = piece_lines()
    for piece, lines in found.items():
        print(f"{lines:5d}  {piece}")
    print(f"{sum(found.values()):5d}  in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
