"""Policy directories written for a test, and the problems their loading reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.policy.loader import load_policy_directory
from webhook.policy.problems import PolicyLoadError


def write_policy(directory: Path, text: str, name: str = "policy.yaml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def load_problems(directory: Path) -> list[str]:
    """Every problem loading `directory` reports, as `file:line: field: message`."""
    with pytest.raises(PolicyLoadError) as caught:
        load_policy_directory(directory)
    return [str(problem) for problem in caught.value.problems]
