"""`webhook lint`: the problems the policy loader finds in a directory or a file, one per line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from webhook.cli.errors import InputError
from webhook.policy.frameworks import told_their_limit
from webhook.policy.loader import POLICY_FILE_SUFFIXES, load_policy_files
from webhook.policy.model import Backend, Framework, Sharing
from webhook.policy.policy_set import PolicySet
from webhook.policy.problems import PolicyLoadError


def run_lint(path: Path, *, stdout: TextIO) -> int:
    """0 when the directory or file loads, 1 when it has problems (each printed as file:line:
    field: problem, the form editors and CI annotations pick up)."""
    load: Callable[[Path], PolicySet]
    if path.is_dir():
        shown, load = _shown(path), PolicySet.load
    elif path.is_file():
        if path.suffix not in POLICY_FILE_SUFFIXES:
            raise InputError(f"{path}: not a policy file ({', '.join(POLICY_FILE_SUFFIXES)})")
        shown, load = str(path), load_alone
    else:
        why = "is neither a file nor a directory" if path.exists() else "no such file or directory"
        raise InputError(f"{path}: {why}")
    try:
        policy_set = load(path)
    except PolicyLoadError as error:
        for problem in error.problems:
            stdout.write(f"{problem}\n")
        count = len(error.problems)
        stdout.write(f"{shown}: {count} problem{'s' if count != 1 else ''}\n")
        return 1
    names = [policy.name for policy in policy_set.policies]
    noun = "policy" if len(names) == 1 else "policies"
    stdout.write(f"{shown}: {len(names)} {noun} OK: {', '.join(names)}\n")
    for policy in policy_set.policies:
        if policy.sharing is not None and not policy.sharing.enforced:
            stdout.write(f"{shown}: notice: {unenforced_notice(policy.name, policy.sharing)}\n")
    return 0


def unenforced_notice(policy_name: str, sharing: Sharing) -> str:
    """What lint and scan say of a pool whose shares nothing below the scheduler holds."""
    told = told_their_limit(sharing)
    left = [framework.value for framework in Framework if framework.value not in told]
    said = f"{_listed(told)} told their limit, " if told else "no framework is told one, "
    if sharing.backend is Backend.DRA:
        # NVIDIA's driver refuses MPS beside consumable shares (dra_settings.py).
        advice = "Use HAMi's DRA driver with hardLimit: HAMiCore, or a MIG alternative"
    else:
        advice = "Set hardLimit: MPS where the nodes run an MPS control daemon, or use the HAMi"
        advice += " or MIG backend"
    return (
        f'policy "{policy_name}" does not enforce its shares (hardLimit: None): nothing on its '
        f"nodes stops a process from taking more than its share; {said}{_listed(left)} not. "
        f"{advice} (docs/frameworks.md)"
    )


def load_alone(file: Path) -> PolicySet:
    """The policies of one file, as a directory holding only it would load: with its own
    GPUModelCatalogue, if it has one, else the built-in catalogue."""
    return PolicySet(load_policy_files([file], str(file)))


def _listed(names: list[str]) -> str:
    return f"{', '.join(names)} {'is' if len(names) == 1 else 'are'}"


def _shown(directory: Path) -> str:
    text = str(directory)
    return text if text.endswith("/") else text + "/"
