"""The copy-on-write recorder of a patch, and the patch as an answer carries it."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest

from webhook.engine.patch import JsonPatch, PatchRecorder, json_pointer


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


def test_put_remove_and_append_are_recorded_and_the_original_is_untouched() -> None:
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


def test_set_of_the_value_already_there_records_nothing_and_nothing_changed() -> None:
    recorder = PatchRecorder(original())
    recorder.set(("metadata", "name"), "p")
    recorder.put(("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), "250m")
    assert recorder.operations == []
    assert not recorder.changed


def test_set_of_another_value_is_a_replace_operation() -> None:
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


def test_set_records_a_copy_that_the_callers_later_changes_do_not_reach() -> None:
    recorder = PatchRecorder(original())
    value = {"a": "1"}
    recorder.set(("spec", "nodeSelector"), value)
    value["b"] = "2"
    assert recorder.operations == [{"op": "add", "path": "/spec/nodeSelector", "value": {"a": "1"}}]


def test_remove_of_what_is_absent_fails_loudly() -> None:
    recorder = PatchRecorder(original())
    with pytest.raises(KeyError):
        recorder.remove(("metadata", "labels"))


def test_append_to_an_absent_list_adds_the_list_and_to_a_present_one_its_end() -> None:
    recorder = PatchRecorder(original())
    recorder.append(("spec", "containers", 0, "env"), {"name": "A"})
    recorder.append(("spec", "containers", 0, "env"), {"name": "B"})
    assert [(op["op"], op["path"]) for op in recorder.operations] == [
        ("add", "/spec/containers/0/env"),
        ("add", "/spec/containers/0/env/-"),
    ]
    assert recorder.changed


def test_append_to_a_null_list_adds_the_list() -> None:
    recorder = PatchRecorder({"spec": {"tolerations": None}})
    recorder.append(("spec", "tolerations"), {"key": "x"})
    assert recorder.operations == [
        {"op": "add", "path": "/spec/tolerations", "value": [{"key": "x"}]}
    ]
    assert recorder.document == {"spec": {"tolerations": [{"key": "x"}]}}


@pytest.mark.parametrize(
    ("parts", "pointer"),
    [
        (
            ("spec", "nodeSelector", "nvidia.com/gpu.product"),
            "/spec/nodeSelector/nvidia.com~1gpu.product",
        ),
        (("metadata", "annotations", "a~b"), "/metadata/annotations/a~0b"),
        (("spec", "containers", "0"), "/spec/containers/0"),
    ],
    ids=["a slash is escaped as ~1", "a tilde is escaped as ~0", "an index is a part like any"],
)
def test_json_pointer_escapes_each_part(parts: tuple[str, ...], pointer: str) -> None:
    assert json_pointer(parts) == pointer


def test_json_patch_of_keeps_a_patch_and_copies_other_operations() -> None:
    operations = [{"op": "remove", "path": "/a"}]
    made = JsonPatch.of(operations)
    assert made == ({"op": "remove", "path": "/a"},) and made[0] is not operations[0]
    assert JsonPatch.of(made) is made


def test_json_patch_base64_is_the_compact_json_text_an_answer_carries() -> None:
    patch = JsonPatch.of([{"op": "add", "path": "/a", "value": "x"}])
    text = base64.b64decode(patch.base64).decode()
    assert text == '[{"op":"add","path":"/a","value":"x"}]'
    assert json.loads(text) == list(patch)


def test_current_reads_the_object_as_patched_so_far() -> None:
    recorder = PatchRecorder(original())
    recorder.remove(("spec", "tolerations"))
    recorder.put(("spec", "nodeSelector", "a"), "1")
    assert recorder.current(("spec", "nodeSelector")) == {"a": "1"}
    assert recorder.current(("spec", "tolerations")) is None
    assert recorder.current(("spec", "containers", 0, "name")) == "a"
    assert recorder.current(("spec", "containers", 5, "name")) is None
    assert recorder.current(("metadata", "name", "deeper")) is None
