"""The maker of DRA shares' ResourceClaimTemplates, connected only once a loaded policy gives
shares as claims (see on_demand.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from webhook.kube.label_modes import CLAIM_TEMPLATES_VARIABLE, check_mode
from webhook.kube.on_demand import OnDemand


class TemplateMaker(Protocol):
    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        """Why a template could not be made, or None when all of them exist."""


class _Unmade:
    """No API to make templates in: every admission that needs one is told why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        names = ", ".join(template["metadata"]["name"] for template in templates)
        return (
            f"the GPU webhook cannot make ResourceClaimTemplate {names} in namespace "
            f'"{namespace}", without which the pod never schedules: {self.reason}'
        )


class _MadeElsewhere:
    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        return None


def _connect(mode: str) -> TemplateMaker:
    if mode == "off":
        return _MadeElsewhere()
    # Imported here: importing them loads the Kubernetes client.
    from webhook.kube.claim_templates import ClaimTemplateWriter
    from webhook.kube.client_config import api_client
    from webhook.policy.namespace_labels import NoCluster

    client = api_client(mode)
    if isinstance(client, NoCluster):
        why = f"{client.reason} (set {CLAIM_TEMPLATES_VARIABLE}=off where they are applied "
        why += "from review's output)"
        return _Unmade(why)
    return ClaimTemplateWriter(client)


class OnDemandClaimTemplates(OnDemand[TemplateMaker]):
    """A `TemplateMaker`, and a `ReloadObserver` of the store. Raises ValueError at once for
    a mode that is not one of `MODES`."""

    def __init__(self, mode: str, connect: Callable[[str], TemplateMaker] = _connect) -> None:
        check_mode(mode, "claim template")
        self.mode = mode
        super().__init__(lambda: connect(mode), lambda policies: policies.makes_claim_templates)

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        return self.connected().ensure(namespace, templates)
