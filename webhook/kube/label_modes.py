"""Where namespace labels come from, as the NAMESPACE_LABELS setting names it: read without
loading the Kubernetes client."""

from __future__ import annotations

MODES = ("auto", "in-cluster", "kubeconfig", "off")
MODE_VARIABLE = "NAMESPACE_LABELS"
