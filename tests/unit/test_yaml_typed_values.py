"""Values YAML 1.1 reads as booleans, numbers or dates where the schema wants a string: the
problem names the value as written, what YAML made of it, and what to write."""

from pathlib import Path

import pytest
import yaml

from tests.support.policy_files import load_problems, write_policy
from webhook.policy.loader import load_policy_directory
from webhook.policy.yaml_documents import _read_documents, read_documents

POLICY = """\
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata:
  name: team
spec:
  match:
    namespaces: [ml]
  sharing:
    vramResource: example.com/vram
    models: [Tesla-T4]
    env: [{name: JAX_VERSION, value: "0.4"}]
    nodes:
      multiGPU: Sum
"""

# (what replaces what in POLICY, the field, the message)
MISREAD = [
    (
        ("multiGPU: Sum", "multiGPU: Yes"),
        "spec.sharing.nodes.multiGPU",
        """Yes is read by YAML as the boolean true, not the string "Yes": write one of 'Skip', """
        "'Sum'",
    ),
    (
        ("multiGPU: Sum", "multiGPU: OFF"),
        "spec.sharing.nodes.multiGPU",
        "OFF is read by YAML as the boolean false",
    ),
    (
        ("namespaces: [ml]", "namespaces: [on]"),
        "spec.match.namespaces[0]",
        'on is read by YAML as the boolean true, not the string "on": quote it ("on")',
    ),
    (
        ("namespaces: [ml]", "namespaces: [No]"),
        "spec.match.namespaces[0]",
        'No is read by YAML as the boolean false, not the string "No": quote it ("No")',
    ),
    (
        ("namespaces: [ml]", "namespaces: [TRUE]"),
        "spec.match.namespaces[0]",
        'TRUE is read by YAML as the boolean true, not the string "TRUE": quote it ("TRUE")',
    ),
    (
        ("models: [Tesla-T4]", "models: [{product: 1080, memoryMiB: 8192}]"),
        "spec.sharing.models[0].product",
        '1080 is read by YAML as the integer 1080, not the string "1080": quote it ("1080")',
    ),
    (
        ("models: [Tesla-T4]", "models: [1080]"),
        "spec.sharing.models[0]",
        '1080 is read by YAML as the integer 1080, not the string "1080": quote it ("1080")',
    ),
    (
        ('value: "0.4"', "value: 1.10"),
        "spec.sharing.env[0].value",
        '1.10 is read by YAML as the number 1.1, not the string "1.10": quote it ("1.10")',
    ),
    (
        ("namespaces: [ml]", "namespaces: [0755]"),
        "spec.match.namespaces[0]",
        '0755 is read by YAML as the integer 493, not the string "0755": quote it ("0755")',
    ),
    (
        ("name: team", "name: 2024-06-01"),
        "metadata.name",
        "2024-06-01 is read by YAML as the date 2024-06-01, not the string "
        '"2024-06-01": quote it ("2024-06-01")',
    ),
]


@pytest.mark.parametrize(
    ("replace", "field", "message"),
    MISREAD,
    ids=[
        "Yes in an enum of strings",
        "OFF in capitals",
        "on as a namespace",
        "No as a namespace",
        "TRUE in capitals",
        "a product name as an integer",
        "a model named by a number",
        "a version as a number",
        "an octal number",
        "a date",
    ],
)
def test_a_value_yaml_typed_is_named_as_written(
    tmp_path: Path, replace: tuple[str, str], field: str, message: str
) -> None:
    old, new = replace
    write_policy(tmp_path, POLICY.replace(old, new))
    problems = load_problems(tmp_path)
    assert any(f": {field}: {message}" in problem for problem in problems), problems


@pytest.mark.parametrize(
    "value",
    ['"Yes"', "'1080'", "y", "n"],
    ids=["double-quoted", "single-quoted", "y is a string", "n is a string"],
)
def test_quoted_values_and_plain_strings_are_not_called_misread(tmp_path: Path, value: str) -> None:
    write_policy(tmp_path, POLICY.replace("multiGPU: Sum", f"multiGPU: {value}"))
    problems = load_problems(tmp_path)
    assert problems and not any("read by YAML" in problem for problem in problems), problems


def test_a_boolean_where_a_boolean_is_wanted_is_no_problem(tmp_path: Path) -> None:
    write_policy(
        tmp_path,
        POLICY.replace('"0.4"', '"0.4", enforce: yes'),
    )
    (policy,) = load_policy_directory(tmp_path)
    assert policy.sharing is not None and policy.sharing.env[0].enforce is True


def test_both_parsers_keep_the_same_text_of_typed_values() -> None:
    text = "a: Yes\nb: 'No'\nc: [1.10, on, x, 0x1F]\nd: {e: 2024-06-01, f: ~, g: 12}\n"
    fast = read_documents(text, "p.yaml")
    slow = _read_documents(yaml.SafeLoader, text, "p.yaml")
    assert [d.typed_text for d in fast] == [d.typed_text for d in slow]
    assert fast[0].typed_text == {
        ("a",): "Yes",
        ("c", 0): "1.10",
        ("c", 1): "on",
        ("c", 3): "0x1F",
        ("d", "e"): "2024-06-01",
        ("d", "g"): "12",
    }
