"""Which Kubernetes API the server reads, as the NAMESPACE_LABELS setting (for namespace
labels) and NODE_INVENTORY (for the nodes' MIG profiles) name it: read without loading the
Kubernetes client."""

from __future__ import annotations

MODES = ("auto", "in-cluster", "kubeconfig", "off")
MODE_VARIABLE = "NAMESPACE_LABELS"
NODE_MODE_VARIABLE = "NODE_INVENTORY"
# Where DRA shares' ResourceClaimTemplates are made (claim_templates.py).
CLAIM_TEMPLATES_VARIABLE = "CLAIM_TEMPLATES"


def check_mode(mode: str, what: str = "namespace label") -> None:
    """Raises ValueError for a mode that is not one of MODES."""
    if mode not in MODES:
        allowed = ", ".join(repr(name) for name in MODES)
        raise ValueError(f"{what} mode {mode!r} is not one of {allowed}")
