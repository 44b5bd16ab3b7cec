"""Loading a policy directory for a command that needs one to run."""

from __future__ import annotations

from pathlib import Path

from webhook.cli.errors import InputError
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError


def load_policy_set(directory: Path, *, used_by: str = "") -> PolicySet:
    """The policies in `directory`; InputError listing every problem when they do not load.
    `used_by` names what needs them, for the message."""
    which = f"{directory} (used by {used_by})" if used_by else str(directory)
    if not directory.is_dir():
        why = "is not a directory" if directory.exists() else "does not exist"
        raise InputError(f"{which}: the policy directory {why}")
    try:
        return PolicySet.load(directory)
    except PolicyLoadError as error:
        lines = [f"the policies in {which} do not load:"]
        lines.extend(f"  {problem}" for problem in error.problems)
        raise InputError(lines) from None
