"""What the engine finds in a pod: rule violations, and shares of GPU memory to give."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from webhook.engine.pod_spec import Container


@dataclass(frozen=True)
class Violation:
    """A broken rule: `rule` is a stable identifier, `message` says what to write instead."""

    rule: str
    message: str


ShareSource = Literal["quantity", "annotation", "vram", "memory"]


@dataclass(frozen=True)
class ShareIntent:
    """A container's wish for part of a GPU, in one of the forms users write.

    `quantity`: a fraction of a GPU resource in limits/requests (`nvidia.com/gpu: 250m`);
    `annotation`: the pod annotation `gpu-fraction`, or `gpu-memory` in MiB; `vram`: the VRAM
    resource itself, as a rewritten object (or a user who wrote it directly) carries it;
    `memory`: the VRAM resource
    written as an amount of memory (`4Gi`), to be rewritten into the policy's unit
    (`vram_units`).
    """

    container: Container
    source: ShareSource
    resource: str
    written: str
    fraction: Fraction | None = None
    vram_units: int | None = None
    in_requests: bool = False
    # The annotation it was written in, for the `annotation` source: gpu-fraction or gpu-memory.
    annotation: str = ""
    # A share the record says the webhook wrote, read back from the backend's resources.
    recorded: bool = False
    # The cards it is on, each giving the amount (HAMi's form of several cards).
    cards: int = 1

    @property
    def asked(self) -> str:
        """What the user wrote, as the record and the messages quote it."""
        if self.source == "annotation":
            return f"{self.annotation}={self.written}"
        return f"{self.resource}={self.written}"


@dataclass(frozen=True)
class WholeGpu:
    container: Container
    resource: str
    count: int
