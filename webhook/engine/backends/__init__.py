"""Sharing backends: one module per system that gives pods a share of a GPU."""

from __future__ import annotations

from webhook.engine.backends.dra import DraBackend
from webhook.engine.backends.extended_resource import ExtendedResourceBackend
from webhook.engine.backends.gpushare import GpushareBackend
from webhook.engine.backends.hami import HamiBackend
from webhook.engine.backends.kai import KaiBackend
from webhook.engine.backends.mig import MigBackend
from webhook.engine.backends.rendering import ShareBackend
from webhook.engine.backends.time_slicing import TimeSlicingBackend
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.share_record import NO_RECORD, ShareRecord
from webhook.policy.model import Backend, Sharing

_BACKENDS: dict[Backend, type[ShareBackend]] = {
    Backend.EXTENDED_RESOURCE: ExtendedResourceBackend,
    Backend.GPUSHARE: GpushareBackend,
    Backend.HAMI: HamiBackend,
    Backend.TIME_SLICING: TimeSlicingBackend,
    Backend.MIG: MigBackend,
    Backend.KAI: KaiBackend,
    Backend.DRA: DraBackend,
}


def backend_for(
    sharing: Sharing,
    policy_name: str,
    inventory: MigInventory = NO_INVENTORY,
    record: ShareRecord = NO_RECORD,
) -> ShareBackend:
    """`record`: what the webhook wrote on this pod before, which a backend may replace."""
    return _BACKENDS[sharing.backend](sharing, policy_name, inventory, record)
