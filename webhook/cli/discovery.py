"""Finding the policy tests under the paths given to `webhook test`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from webhook.cli.errors import InputError
from webhook.cli.scenario_folders import is_scenario_folder
from webhook.cli.suite_files import SUITE_FILE


@dataclass(frozen=True)
class FoundTest:
    """A suite file or a scenario folder, and the path given that it was found under."""

    form: Literal["suite", "scenario"]
    path: Path
    root: Path


def discover(root: Path) -> list[FoundTest]:
    """The `gpu-test.yaml` files and scenario folders under `root`, in path order. A file given
    by name is read as a suite whatever its name."""
    if root.is_file():
        return [FoundTest("suite", root, root.parent)]
    if not root.is_dir():
        raise InputError(f"{root}: no such file or directory")
    found: list[FoundTest] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        here = Path(folder)
        if SUITE_FILE in files:
            found.append(FoundTest("suite", here / SUITE_FILE, root))
        if is_scenario_folder(here):
            found.append(FoundTest("scenario", here, root))
    if not found:
        raise InputError(
            f"{root}: no {SUITE_FILE} and no scenario folder (one with review.json or "
            "resource.yaml) in it"
        )
    return found
