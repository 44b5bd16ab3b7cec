"""Where a probe's share comes from (webhook/probe/share.py): the share file that the render step
writes, an env file, and the webhook's shares record as a downward-API volume shows it to the
pod, read without the engine and held here to the engine's own reader and writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webhook.engine.share_record import ContainerShare, ShareRecord
from webhook.policy import defaults
from webhook.probe.share import (
    POLICY_ANNOTATION,
    SHARES_ANNOTATION,
    Share,
    ShareError,
    parse_downward_api,
    read_annotations_share,
    read_env_file,
    read_share_file,
    share_file_text,
    unquote_go,
)


def test_the_probe_reads_the_annotations_the_webhook_writes() -> None:
    assert SHARES_ANNOTATION == defaults.SHARES_ANNOTATION
    assert POLICY_ANNOTATION == defaults.POLICY_ANNOTATION


# The share file -----------------------------------------------------------------------------


def test_a_share_reads_back_from_the_file_written_for_it(tmp_path: Path) -> None:
    share = Share(
        3840,
        {"XLA_CLIENT_MEM_FRACTION": "0.25", "TF_FORCE_GPU_ALLOW_GROWTH": "true"},
        {"policy": "default", "backend": "ExtendedResource", "model": "Tesla-T4"},
        "policies policies",
    )
    path = tmp_path / "share.json"
    path.write_text(share_file_text(share))
    assert json.loads(path.read_text())["shareMiB"] == 3840
    read = read_share_file(path)
    assert (read.mib, read.env, read.about, read.source) == (
        share.mib,
        share.env,
        share.about,
        str(path),
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not JSON"),
        ("[]", "must hold a JSON object"),
        ("{}", "shareMiB must be a whole number"),
        ('{"shareMiB": 0}', "above 0"),
        ('{"shareMiB": "3840"}', "shareMiB"),
        ('{"shareMiB": true}', "shareMiB"),
        ('{"shareMiB": 3840, "env": {"A": 1}}', "env must map variable names to strings"),
        ('{"shareMiB": 3840, "env": ["A=1"]}', "env must map"),
    ],
)
def test_a_share_file_that_is_wrong_says_what_is(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "share.json"
    path.write_text(text)
    with pytest.raises(ShareError, match=words) as raised:
        read_share_file(path)
    assert str(raised.value).startswith(str(path))


def test_a_share_file_that_is_not_there_says_so(tmp_path: Path) -> None:
    with pytest.raises(ShareError, match="cannot be read"):
        read_share_file(tmp_path / "missing.json")


# The env file -------------------------------------------------------------------------------


def test_an_env_file_gives_each_variable_as_written(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text(
        "# to try\n\nPYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.25\n"
        '  CUPY_GPU_MEMORY_LIMIT=25%\nEMPTY=\nQUOTED="a b"\n'
    )
    assert read_env_file(path) == {
        "PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:0.25",
        "CUPY_GPU_MEMORY_LIMIT": "25%",
        "EMPTY": "",
        "QUOTED": '"a b"',
    }


@pytest.mark.parametrize("line", ["JUST_A_NAME", "=value", "TWO WORDS=x"])
def test_an_env_file_line_that_is_no_assignment_is_named(tmp_path: Path, line: str) -> None:
    path = tmp_path / "env"
    path.write_text(f"A=1\n{line}\n")
    with pytest.raises(ShareError, match=f"{path}:2: not NAME=VALUE"):
        read_env_file(path)


# The downward API's quoting (Go's %q) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("quoted", "value"),
    [
        ('""', ""),
        ('"plain"', "plain"),
        ('"{\\"model\\":\\"Tesla-T4\\"}"', '{"model":"Tesla-T4"}'),
        ('"a\\\\b"', "a\\b"),
        ('"line\\nnext\\ttab"', "line\nnext\ttab"),
        ('"\\x00\\x7f"', "\x00\x7f"),
        ('"\\u00e9\\U0001F600"', "\u00e9\U0001f600"),
        ('"é kept"', "é kept"),
        ('"\\xc3\\xa9"', "é"),
        ('"\\101"', "A"),
        ('"\\a\\b\\f\\r\\v\\\'"', "\a\b\f\r\v'"),
    ],
    ids=[
        "empty",
        "plain",
        "quotes",
        "backslash",
        "newline and tab",
        "control bytes",
        "unicode escapes",
        "printable unicode as is",
        "bytes of UTF-8",
        "octal",
        "the other short escapes",
    ],
)
def test_a_go_quoted_value_reads_as_the_string_it_stands_for(quoted: str, value: str) -> None:
    assert unquote_go(quoted) == value


@pytest.mark.parametrize(
    ("quoted", "words"),
    [
        ("plain", "not a double-quoted string"),
        ('"', "not a double-quoted string"),
        ('"a"b"', "unescaped quote"),
        ('"a\\"', "ends in a backslash"),
        ('"\\q"', "unknown escape"),
        ('"\\x4"', "needs 2 digits"),
        ('"\\xzz"', "digits 'zz'"),
        ('"\\777"', "above 255"),
    ],
)
def test_a_value_that_is_not_go_quoted_is_refused(quoted: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        unquote_go(quoted)


def downward_api(annotations: dict[str, str]) -> str:
    """The file the kubelet writes: sorted key="value" lines, quoted as Go's %q quotes."""
    return "\n".join(f"{key}={_go_quote(value)}" for key, value in sorted(annotations.items()))


def _go_quote(value: str) -> str:
    # Enough of Go's %q for these values: quotes, backslashes and newlines escaped.
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def test_a_downward_api_file_reads_as_its_map() -> None:
    annotations = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Job"}\n',
        "gpu-admission.example.com/policy": "default",
        "empty": "",
    }
    assert parse_downward_api(downward_api(annotations)) == annotations


def test_a_downward_api_line_that_does_not_read_is_named() -> None:
    with pytest.raises(ShareError, match="annotations:2: broken: the value is not"):
        parse_downward_api('good="1"\nbroken=1\n')


# The shares record ------------------------------------------------------------------------


def annotations_file(tmp_path: Path, record: ShareRecord, policy: str = "default") -> Path:
    path = tmp_path / "annotations"
    annotations = {SHARES_ANNOTATION: record.encode(), POLICY_ANNOTATION: policy, "other": "x"}
    path.write_text(downward_api(annotations))
    return path


EXTENDED_RESOURCE = ShareRecord(
    model="Tesla-T4",
    containers={
        "infer": ContainerShare("nvidia.com/gpu=0.25", "3840", ("XLA_CLIENT_MEM_FRACTION",))
    },
)
GPUSHARE = ShareRecord(
    model="Tesla-T4",
    containers={
        "infer": ContainerShare(
            "nvidia.com/gpu=0.25", "3", (), {"aliyun.com/gpu-mem": "3"}, {}, "3072"
        )
    },
)


@pytest.mark.parametrize(
    ("record", "unit", "mib"),
    [
        (EXTENDED_RESOURCE, "MiB", 3840),
        (GPUSHARE, "MiB", 3072),
        (GPUSHARE, "GiB", 3072),
        (
            ShareRecord(containers={"infer": ContainerShare("example.com/vram=4Gi", "4")}),
            "GiB",
            4096,
        ),
    ],
    ids=[
        "the VRAM resource in MiB",
        "the MiB beside what a backend wrote",
        "the MiB whatever the unit",
        "the VRAM resource in GiB",
    ],
)
def test_the_share_is_read_from_the_record_the_engine_writes(
    tmp_path: Path, record: ShareRecord, unit: str, mib: int
) -> None:
    path = annotations_file(tmp_path, record)
    share = read_annotations_share(path, unit=unit)
    assert share.mib == mib
    assert share.env == {}
    assert share.about["container"] == "infer"
    assert share.about["policy"] == "default"
    # The engine reads the same record the same way.
    engine_entry = ShareRecord.read({SHARES_ANNOTATION: record.encode()}).containers["infer"]
    assert share.about["asked"] == engine_entry.asked


TWO = ShareRecord(
    containers={
        "infer": ContainerShare("nvidia.com/gpu=0.25", "3840"),
        "sidecar": ContainerShare("nvidia.com/gpu=0.5", "7680"),
    }
)


def test_a_record_of_several_shares_needs_the_container_named(tmp_path: Path) -> None:
    path = annotations_file(tmp_path, TWO)
    with pytest.raises(ShareError, match=r"2 containers \(infer, sidecar\): name one"):
        read_annotations_share(path)
    assert read_annotations_share(path, container="sidecar").mib == 7680
    with pytest.raises(ShareError, match="no share for container 'main'"):
        read_annotations_share(path, container="main")


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        ({}, "no gpu-admission.example.com/shares annotation: the webhook gave this pod no share"),
        ({SHARES_ANNOTATION: "{"}, "does not parse"),
        ({SHARES_ANNOTATION: '{"containers": []}'}, "does not parse"),
        ({SHARES_ANNOTATION: '{"containers": {"a": {"vram": "x"}}}'}, "gives no MiB"),
        ({SHARES_ANNOTATION: '{"containers": {"a": "3840"}}'}, "is not an object"),
    ],
    ids=["no record", "not JSON", "no containers map", "no amount", "an entry not an object"],
)
def test_annotations_without_a_readable_share_say_why(
    tmp_path: Path, annotations: dict[str, str], words: str
) -> None:
    path = tmp_path / "annotations"
    path.write_text(downward_api(annotations))
    with pytest.raises(ShareError, match=words):
        read_annotations_share(path)
