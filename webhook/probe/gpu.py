"""Whether this machine has an NVIDIA GPU to probe, asked before any framework is started: a
node without one would only show each framework failing for a reason that is not the share's.

A container given a card by the NVIDIA runtime or device plugin has its /dev/nvidia<N> device
(N is the card's index on the host, not always 0); nvidia-smi is asked where no device file is
seen, since some runtimes expose the card without one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

DEVICE = re.compile(r"nvidia\d+")
NVIDIA_SMI_TIMEOUT_S = 30


def missing_gpu(
    dev: Path = Path("/dev"),
    which: Callable[[str], str | None] = shutil.which,
    list_gpus: Callable[[str], str | None] | None = None,
) -> str | None:
    """None when an NVIDIA GPU is here; else one line that says what was looked at."""
    try:
        if any(DEVICE.fullmatch(entry.name) for entry in dev.iterdir()):
            return None
    except OSError:
        pass
    smi = which("nvidia-smi")
    if smi is None:
        return f"no NVIDIA GPU here: no {dev}/nvidia<N> device, and no nvidia-smi on the PATH"
    listing = (list_gpus or _nvidia_smi_list)(smi)
    if listing is not None and any(line.startswith("GPU ") for line in listing.splitlines()):
        return None
    return f"no NVIDIA GPU here: no {dev}/nvidia<N> device, and `nvidia-smi -L` lists none"


def _nvidia_smi_list(smi: str) -> str | None:
    try:
        listed = subprocess.run(
            [smi, "-L"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return listed.stdout if listed.returncode == 0 else None
