"""share_record.py: the record of what the webhook manages in a pod, read back from its one
annotation; a record that does not parse counts as none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook.engine.share_record import (
    MAX_RECORD_CHARS,
    NO_RECORD,
    ContainerShare,
    ShareRecord,
)
from webhook.policy.defaults import SHARES_ANNOTATION

QUARTER = ContainerShare("nvidia.com/gpu=0.25", "3840")
TOLERATION = {"key": "pool", "operator": "Equal", "value": "shared", "effect": "NoSchedule"}

FULL = ShareRecord(
    model="NVIDIA-A100-SXM4-40GB",
    pinned=True,
    containers={
        "b": ContainerShare(
            "example.com/vram=4Gi",
            "4096",
            ("CUPY_GPU_MEMORY_LIMIT", "PYTORCH_CUDA_ALLOC_CONF"),
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"},
            {"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction"},
            "4096",
        ),
        "a": ContainerShare(
            "nvidia.com/gpu=0.25", "10240", mib="10240", claim="a-gpu", template="share-10240"
        ),
    },
    runtime_class_name="nvidia",
    tolerations=(TOLERATION,),
    node_selector={"pool": "shared", "arch": "x86"},
    annotations={"gpu-fraction": "0.25"},
    labels={"kai.scheduler/queue": "q"},
    scheduler_name="kai-scheduler",
    hard_limit="MPS",
)


def test_container_share_defaults_to_one_card_with_nothing_given_or_claimed() -> None:
    share = ContainerShare("nvidia.com/gpu=0.25", "3840")
    assert (share.env, dict(share.given), dict(share.merged)) == ((), {}, {})
    assert (share.mib, share.limit_mib, share.cards, share.claim, share.template) == (
        "",
        "",
        1,
        "",
        "",
    )


def test_share_record_encode_of_a_minimal_record() -> None:
    record = ShareRecord("Tesla-T4", True, {"c": QUARTER})
    assert record.encode() == (
        '{"model":"Tesla-T4","pinned":true,"containers":'
        '{"c":{"asked":"nvidia.com/gpu=0.25","vram":"3840","env":[]}}}'
    )


def test_share_record_encode_sorts_containers_and_maps_and_writes_only_what_is_set() -> None:
    data = json.loads(FULL.encode())
    assert list(data) == [
        "model",
        "pinned",
        "containers",
        "runtimeClassName",
        "tolerations",
        "nodeSelector",
        "annotations",
        "labels",
        "schedulerName",
        "hardLimit",
    ]
    assert list(data["containers"]) == ["a", "b"]
    assert list(data["nodeSelector"]) == ["arch", "pool"]
    assert data["containers"]["a"] == {
        "asked": "nvidia.com/gpu=0.25",
        "vram": "10240",
        "env": [],
        "mib": "10240",
        "claim": "a-gpu",
        "template": "share-10240",
    }
    assert data["containers"]["b"] == {
        "asked": "example.com/vram=4Gi",
        "vram": "4096",
        "env": ["CUPY_GPU_MEMORY_LIMIT", "PYTORCH_CUDA_ALLOC_CONF"],
        "given": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"},
        "mib": "4096",
        "merged": {"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction"},
    }


def test_share_record_encode_writes_the_audit_fields_no_pass_reads_back() -> None:
    audited = ContainerShare("nvidia.com/gpu=0.25", "10240", limit_mib="10649", cards=2)
    entry = json.loads(ShareRecord("m", False, {"c": audited}).encode())["containers"]["c"]
    assert (entry["limitMiB"], entry["cards"]) == ("10649", 2)
    read = ShareRecord.read({SHARES_ANNOTATION: ShareRecord("m", False, {"c": audited}).encode()})
    assert (read.containers["c"].limit_mib, read.containers["c"].cards) == ("", 1)


@pytest.mark.parametrize(
    "record",
    [FULL, ShareRecord("Tesla-T4", True, {"c": QUARTER}), ShareRecord(None, False, {})],
    ids=["every field", "a quarter pinned to a T4", "an empty record"],
)
def test_share_record_read_gives_back_what_encode_wrote(record: ShareRecord) -> None:
    assert ShareRecord.read({SHARES_ANNOTATION: record.encode()}) == record


def test_share_record_read_takes_pinned_only_as_true() -> None:
    text = '{"model":"Tesla-T4","pinned":"true","containers":{}}'
    record = ShareRecord.read({SHARES_ANNOTATION: text})
    assert (record.model, record.pinned) == ("Tesla-T4", False)


def test_share_record_read_takes_a_record_as_long_as_the_limit() -> None:
    text = '{"model":"T4","pinned":true,"containers":{}}'
    padded = text + " " * (MAX_RECORD_CHARS - len(text))
    assert ShareRecord.read({SHARES_ANNOTATION: padded}).model == "T4"
    assert ShareRecord.read({SHARES_ANNOTATION: padded + " "}) == ShareRecord()


@pytest.mark.parametrize(
    "value",
    [
        None,
        {"model": "T4"},
        "not json",
        "null",
        "[]",
        '{"model":"T4"}',
        '{"model":"T4","containers":[]}',
        '{"model":5,"containers":{}}',
        '{"containers":{"c":{"vram":"1"}}}',
        '{"containers":{"c":{"asked":"a","vram":"1","given":{"nvidia.com/gpu":1}}}}',
        '{"containers":{"c":{"asked":"a","vram":"1","claim":5}}}',
        '{"containers":{"c":{"asked":"a","vram":"1","env":"AB"}}}',
        '{"containers":{},"tolerations":["x"]}',
        '{"containers":{},"nodeSelector":[]}',
        '{"containers":{},"schedulerName":true}',
        "[" * 100_000,
    ],
    ids=[
        "no annotation",
        "an object rather than text",
        "text that is no JSON",
        "null",
        "a list",
        "no containers",
        "containers that are no object",
        "a model that is no string",
        "a share without what was asked",
        "a resource amount that is no string",
        "a claim that is no string",
        "env that is a string, not a list of names",
        "a toleration that is no object",
        "a node selector that is no object",
        "a scheduler that is no string",
        "JSON nested deeper than the decoder goes",
    ],
)
def test_share_record_read_counts_a_record_it_cannot_parse_as_none(value: Any) -> None:
    annotations = {} if value is None else {SHARES_ANNOTATION: value}
    assert ShareRecord.read(annotations) == ShareRecord() == NO_RECORD


@pytest.mark.parametrize(
    ("container", "given"),
    [
        ("b", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"}),
        ("a", {}),
        ("missing", {}),
    ],
    ids=[
        "what the backend wrote",
        "a DRA share's resources are its claim",
        "nothing for a container without a share",
    ],
)
def test_share_record_given_of_a_container(container: str, given: dict[str, str]) -> None:
    assert dict(FULL.given_of(container, "example.com/vram")) == given


def test_share_record_given_of_a_record_from_before_backends_is_the_vram_resource() -> None:
    record = ShareRecord("Tesla-T4", True, {"c": QUARTER})
    assert dict(record.given_of("c", "example.com/vram")) == {"example.com/vram": "3840"}


@pytest.mark.parametrize(
    ("container", "vram"),
    [("a", "10240"), ("b", "4096"), ("missing", None)],
    ids=["a DRA share", "a HAMi share", "no share"],
)
def test_share_record_vram_of_a_container(container: str, vram: str | None) -> None:
    assert FULL.vram_of(container) == vram
