"""`webhook lint`: the problems the policy loader finds in a directory, one per line."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from webhook.cli.errors import InputError
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError


def run_lint(directory: Path, *, stdout: TextIO) -> int:
    """0 when the directory loads, 1 when it has problems (each printed as file:line: field:
    problem, the form editors and CI annotations pick up)."""
    if not directory.is_dir():
        why = "is not a directory" if directory.exists() else "does not exist"
        raise InputError(f"{directory}: {why}")
    shown = _shown(directory)
    try:
        policy_set = PolicySet.load(directory)
    except PolicyLoadError as error:
        for problem in error.problems:
            stdout.write(f"{problem}\n")
        count = len(error.problems)
        stdout.write(f"{shown}: {count} problem{'s' if count != 1 else ''}\n")
        return 1
    names = [policy.name for policy in policy_set.policies]
    noun = "policy" if len(names) == 1 else "policies"
    stdout.write(f"{shown}: {len(names)} {noun} OK: {', '.join(names)}\n")
    return 0


def _shown(directory: Path) -> str:
    text = str(directory)
    return text if text.endswith("/") else text + "/"
