"""`kubectl kustomize`, for tests that check what a kustomization renders."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def kustomize(directory: Path) -> str:
    """The YAML `kubectl kustomize` prints for a directory; skips the test without kubectl."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(f"kubectl is not installed, so {directory} cannot be built with its kustomize")
    result = subprocess.run(
        [kubectl, "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {directory}:\n{result.stderr}"
    return result.stdout
