"""The fast (libyaml) reading of policy files against PyYAML's own parser."""

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from webhook.policy.yaml_documents import DocumentError, _read_documents, read_documents

SCALARS = st.one_of(
    st.integers(),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.floats(allow_nan=False),
)
KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-./", min_size=1, max_size=10)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


@given(st.lists(st.dictionaries(KEYS, VALUES, min_size=1, max_size=5), min_size=1, max_size=3))
def test_documents_and_lines_match_the_pure_python_parser(documents: list[object]) -> None:
    text = yaml.safe_dump_all(documents, default_flow_style=False)
    fast = read_documents(text, "p.yaml")
    slow = _read_documents(yaml.SafeLoader, text, "p.yaml")
    assert [(d.content, d.lines) for d in fast] == [(d.content, d.lines) for d in slow]
    assert [d.content for d in fast] == documents


def test_a_character_yaml_forbids_is_named_with_its_line() -> None:
    text = "apiVersion: v1\nkind: GpuPolicy\nmetadata:\n  name: te\x07am\n"
    with pytest.raises(DocumentError) as raised:
        read_documents(text, "team.yaml")
    problem = raised.value.problem
    assert (problem.file, problem.line) == ("team.yaml", 4)
    assert problem.message == "invalid YAML: special characters are not allowed (#x7)"
