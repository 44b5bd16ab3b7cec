import copy
from typing import Any

import jsonpatch
import pytest

from webhook.engine.patch import PatchRecorder


def original() -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "250m"}}}],
            "tolerations": [{"key": "x", "operator": "Exists"}],
        },
    }


def assert_patch_gives_document(recorder: PatchRecorder, before: dict[str, Any]) -> None:
    assert recorder.original == before, "the original object must never change"
    assert jsonpatch.apply_patch(before, recorder.operations) == recorder.document


def test_changes_are_recorded_and_the_original_is_untouched() -> None:
    obj = original()
    before = copy.deepcopy(obj)
    recorder = PatchRecorder(obj)
    limits = ("spec", "containers", 0, "resources", "limits")
    recorder.put((*limits, "example.com/vram"), "3840")
    recorder.remove((*limits, "nvidia.com/gpu"))
    recorder.append(("spec", "tolerations"), {"key": "example.com/vram", "operator": "Exists"})
    recorder.append(("spec", "containers", 0, "env"), {"name": "A", "value": "1"})
    recorder.append(("spec", "containers", 0, "env"), {"name": "B", "value": "2"})
    recorder.put(("metadata", "annotations", "a/b~c"), "x")
    recorder.put(("metadata", "annotations", "d"), "y")
    assert_patch_gives_document(recorder, before)
    assert recorder.document["spec"]["containers"][0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
    ]
    paths = [op["path"] for op in recorder.operations]
    assert "/spec/containers/0/resources/limits/example.com~1vram" in paths
    assert "/metadata/annotations" in paths and "/metadata/annotations/d" in paths
    assert "/spec/tolerations/-" in paths


def test_untouched_subtrees_are_shared_not_copied() -> None:
    obj = original()
    recorder = PatchRecorder(obj)
    recorder.put(("metadata", "annotations", "k"), "v")
    assert recorder.document is not obj
    assert recorder.document["spec"] is obj["spec"]
    assert recorder.document["metadata"] is not obj["metadata"]


def test_writing_the_value_already_there_records_nothing() -> None:
    recorder = PatchRecorder(original())
    recorder.set(("metadata", "name"), "p")
    recorder.put(("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), "250m")
    assert recorder.operations == []
    assert not recorder.changed


def test_a_replaced_value_is_a_replace_operation() -> None:
    obj = original()
    recorder = PatchRecorder(obj)
    recorder.set(("metadata", "name"), "q")
    assert recorder.operations == [{"op": "replace", "path": "/metadata/name", "value": "q"}]
    assert_patch_gives_document(recorder, original())


def test_put_creates_every_missing_mapping_in_one_operation() -> None:
    obj = original()
    recorder = PatchRecorder(obj)
    recorder.put(("spec", "containers", 0, "resources", "requests", "example.com/vram"), "1")
    assert recorder.operations == [
        {
            "op": "add",
            "path": "/spec/containers/0/resources/requests",
            "value": {"example.com/vram": "1"},
        }
    ]
    assert_patch_gives_document(recorder, original())


def test_recorded_values_do_not_change_with_later_writes() -> None:
    recorder = PatchRecorder(original())
    recorder.put(("spec", "nodeSelector", "a"), "1")
    recorder.put(("spec", "nodeSelector", "b"), "2")
    assert recorder.operations[0]["value"] == {"a": "1"}
    assert_patch_gives_document(recorder, original())


def test_removing_what_is_absent_fails_loudly() -> None:
    recorder = PatchRecorder(original())
    with pytest.raises(KeyError):
        recorder.remove(("metadata", "labels"))
