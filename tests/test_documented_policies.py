"""The policies the docs show load as they are written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from webhook.policy.policy_set import PolicySet

REPO_ROOT = Path(__file__).resolve().parents[1]
COOKBOOK = sorted((REPO_ROOT / "examples" / "cookbook").glob("*/policies"))


def test_every_recipe_has_policies() -> None:
    assert {path.parent.name for path in COOKBOOK} >= {
        "one-model",
        "mixed-models",
        "opt-in-by-label",
        "production-whole-only",
    }


@pytest.mark.parametrize("directory", COOKBOOK, ids=[path.parent.name for path in COOKBOOK])
def test_cookbook_policies_load(directory: Path) -> None:
    assert PolicySet.load(directory).policies


def test_the_complete_example_of_the_reference_loads(tmp_path: Path) -> None:
    reference = (REPO_ROOT / "docs" / "policy-reference.md").read_text()
    section = reference.split("## A complete example", 1)[1]
    example = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert example is not None
    (tmp_path / "example.yaml").write_text(example.group(1))
    (policy,) = PolicySet.load(tmp_path).policies
    assert policy.priority == 10 and policy.exclude is not None
