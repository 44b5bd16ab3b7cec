"""Outcomes of pods already judged, kept by everything the engine reads of them.

The pods of one ReplicaSet, Job or StatefulSet differ only in what the engine never reads
(their names, the token volume the apiserver adds), so each pod after the first reuses the
first one's outcome instead of being judged again. The key is the pod's `engine_input`, the
governing policy (by identity: a reloaded set brings new objects) and the mode, so two pods
share an outcome only when the engine would see the same thing in them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from webhook.bounded_cache import BoundedCache
from webhook.engine.evaluate import Mode, PodOutcome, evaluate_pod
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.pod_spec import PodParts, PodView, engine_input, metadata_sent
from webhook.engine.workloads import PodTemplateLocation
from webhook.policy.model import Policy

# A few hundred distinct pod shapes cover a large cluster's workloads; an entry is a few KiB.
DEFAULT_MAX_ENTRIES = 1024
# What the entries of one worker may weigh together: a key is the pod's engine input, which a
# client chooses, so distinct large pods would otherwise fill 1,024 entries of their size.
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
# What an outcome weighs besides its key and its operations: the objects that hold them.
ENTRY_OVERHEAD_BYTES = 1024

_Key = tuple[Mode, PodTemplateLocation, str, str, int]


class OutcomeCache:
    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        # Owned by the governing policy: a reloaded set brings new objects.
        self._entries: BoundedCache[_Key, PodOutcome] = BoundedCache(max_entries, max_bytes)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        """An estimate of the bytes the entries hold: their keys, operations and messages."""
        return self._entries.weight

    def evaluate(
        self,
        obj: dict[str, Any],
        location: PodTemplateLocation,
        parts: PodParts,
        policy: Policy,
        mode: Mode,
        inventory: MigInventory = NO_INVENTORY,
    ) -> PodOutcome:
        """What `evaluate_pod` says of this pod (whose `pod_parts` are given), without its
        `document`. A pod is read into a `PodView` only when it is judged. `inventory`: the
        nodes' snapshot, whose version is part of the key."""
        gives_labels = policy.sharing is not None and policy.sharing.gives_labels
        text = engine_input(location, parts, gives_labels)
        # Absent and null metadata read alike but are patched differently: a key part of its own
        # says which, rather than a copy of the text with a prefix.
        sent = metadata_sent(obj, location)
        key = None if text is None else (mode, location, sent, text, inventory.version)
        outcome = None if key is None else self._entries.get(policy, key)
        if outcome is None:
            pod = PodView.of_parts(location, parts)
            judged = evaluate_pod(obj, location, policy, mode, pod, inventory)
            outcome = replace(judged, document=None)
            if key is not None and text is not None:
                self._entries.put(policy, key, outcome, _weight(text, outcome))
        return outcome


def _weight(text: str, outcome: PodOutcome) -> int:
    """Bytes an entry holds, roughly: its key text twice (the string, and the objects read from
    it that the outcome keeps), its patch values, its messages and its companions. Made on a
    miss only."""
    held = 2 * len(text) + ENTRY_OVERHEAD_BYTES
    held += sum(len(repr(operation)) for operation in outcome.operations)
    held += sum(len(message) for message in outcome.warnings)
    held += sum(len(repr(companion)) for companion in outcome.companions)
    return held + sum(len(violation.message) for violation in outcome.violations)
