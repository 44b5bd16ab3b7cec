"""findings.py: what the engine finds in a pod, as values: a broken rule, a wish for part of a
GPU and what the user wrote for it, whole GPUs."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from tests.unit.engine.builders import GPU, VRAM, container, first_container, pod
from webhook.engine.findings import ShareIntent, Violation, WholeGpu

CONTAINER = first_container(pod(container("serve", {GPU: "250m"})))


@pytest.mark.parametrize(
    ("intent", "asked"),
    [
        (ShareIntent(CONTAINER, "quantity", GPU, "250m", Fraction(1, 4)), "nvidia.com/gpu=250m"),
        (ShareIntent(CONTAINER, "memory", VRAM, "4Gi", None, 4096), "example.com/vram=4Gi"),
        (ShareIntent(CONTAINER, "vram", VRAM, "3840", None, 3840), "example.com/vram=3840"),
        (
            ShareIntent(
                CONTAINER, "annotation", GPU, "0.5", Fraction(1, 2), annotation="gpu-fraction"
            ),
            "gpu-fraction=0.5",
        ),
        (
            ShareIntent(CONTAINER, "annotation", VRAM, "2048", None, 2048, annotation="gpu-memory"),
            "gpu-memory=2048",
        ),
    ],
    ids=[
        "a fraction in the limits names its resource",
        "an amount of memory as written",
        "the VRAM resource as written",
        "a fraction annotation names the annotation, not the resource",
        "a memory annotation names the annotation",
    ],
)
def test_share_intent_asked_quotes_what_the_user_wrote(intent: ShareIntent, asked: str) -> None:
    assert intent.asked == asked


def test_share_intent_defaults_to_one_card_in_the_limits_written_by_the_user() -> None:
    intent = ShareIntent(CONTAINER, "quantity", GPU, "250m", Fraction(1, 4))
    assert (intent.vram_units, intent.in_requests, intent.recorded, intent.cards) == (
        None,
        False,
        False,
        1,
    )


def test_violation_is_a_frozen_value_compared_by_rule_and_message() -> None:
    violation = Violation("share-too-small", "ask for more")
    assert violation == Violation("share-too-small", "ask for more")
    assert violation != Violation("share-too-large", "ask for more")
    with pytest.raises(dataclasses.FrozenInstanceError):
        violation.rule = "other"  # type: ignore[misc]


def test_whole_gpu_keeps_the_container_the_resource_and_the_count() -> None:
    whole = WholeGpu(CONTAINER, GPU, 2)
    assert (whole.container.label, whole.resource, whole.count) == ('container "serve"', GPU, 2)
    assert whole == WholeGpu(CONTAINER, GPU, 2)
