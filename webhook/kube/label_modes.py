"""Where namespace labels come from, as the NAMESPACE_LABELS setting names it: read without
loading the Kubernetes client."""

from __future__ import annotations

MODES = ("auto", "in-cluster", "kubeconfig", "off")
MODE_VARIABLE = "NAMESPACE_LABELS"


def check_mode(mode: str) -> None:
    """Raises ValueError for a mode that is not one of MODES."""
    if mode not in MODES:
        allowed = ", ".join(repr(name) for name in MODES)
        raise ValueError(f"namespace label mode {mode!r} is not one of {allowed}")
