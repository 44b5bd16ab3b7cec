"""Every public function of the engine and of each sharing backend is named by a unit test of
its own module, so that a change to it fails a test that says which function broke (beside the
scenario folders, which name a scenario)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE = REPO_ROOT / "webhook" / "engine"
UNIT = REPO_ROOT / "tests" / "unit"


def public_functions(module: Path) -> list[str]:
    """Functions, and methods of classes, whose names do not start with an underscore."""
    found = []
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            found.append(node.name)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += [
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("_")
            ]
    return found


def names_of_tests(test_file: Path) -> list[str]:
    return [
        node.name
        for node in ast.walk(ast.parse(test_file.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


def named(function: str, names: list[str]) -> bool:
    """Whether a test's name holds the function's name (a method's, without its class) as a
    whole word of it: `render` is not named by a test of `rendering`."""
    word = re.compile(rf"(?:^test_|_){re.escape(function.rpartition('.')[2].lower())}(?:_|$)")
    return any(word.search(name) for name in names)


def modules() -> list[tuple[Path, Path]]:
    pairs = []
    for module in sorted(ENGINE.glob("*.py")):
        if module.name != "__init__.py":
            pairs.append((module, UNIT / "engine" / f"test_{module.stem}.py"))
    for module in sorted((ENGINE / "backends").glob("*.py")):
        if module.name != "__init__.py":
            pairs.append((module, UNIT / "backends" / f"test_{module.stem}.py"))
    return pairs


@pytest.mark.parametrize(("module", "tests"), modules(), ids=lambda path: path.stem)
def test_every_public_function_is_named_by_a_test_of_its_module(module: Path, tests: Path) -> None:
    assert tests.is_file(), f"{module.name} has no unit tests of its own ({tests.name})"
    names = names_of_tests(tests)
    unnamed = [function for function in public_functions(module) if not named(function, names)]
    assert not unnamed, f"{tests.name} names no test after {', '.join(unnamed)}"
