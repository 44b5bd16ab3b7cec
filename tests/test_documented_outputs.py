"""The shares records the docs show are the ones the webhook writes: each is found in what
`gpu-admission review` gives the shared example pods under one of the shipped or example
policy directories, so that a change of output cannot leave the docs behind."""

from __future__ import annotations

import io
import itertools
import json
import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from webhook.cli.main import main
from webhook.policy.defaults import SHARES_ANNOTATION

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md")])
POLICY_DIRECTORIES = [
    REPO_ROOT / "policies",
    *sorted(p for p in (REPO_ROOT / "examples" / "policies").iterdir() if p.is_dir()),
]
SHOWN = re.compile(re.escape(SHARES_ANNOTATION) + r": '(\{.*\})'")


@cache
def records_written() -> list[dict[str, object]]:
    found = []
    pods = (REPO_ROOT / "examples" / "policies" / "pods.yaml").read_text().split("\n---\n")
    for directory, pod in itertools.product(POLICY_DIRECTORIES, pods):
        out = io.StringIO()
        # One by one: review prints nothing when one object of its input is denied.
        main(
            ["review", "-f", "-", "--policies", str(directory)],
            stdin=io.StringIO(pod),
            stdout=out,
            stderr=io.StringIO(),
        )
        for document in yaml.safe_load_all(out.getvalue()):
            if not document:
                continue
            for metadata in (
                document.get("metadata", {}),
                document.get("spec", {}).get("template", {}).get("metadata", {}),
            ):
                text = (metadata.get("annotations") or {}).get(SHARES_ANNOTATION)
                if text:
                    found.append(json.loads(text))
    return found


def shown_records() -> list[tuple[str, str]]:
    return [
        (f"{document.relative_to(REPO_ROOT)}:{number}", match[1])
        for document in DOCUMENTS
        for number, line in enumerate(document.read_text().splitlines(), 1)
        if (match := SHOWN.search(line))
    ]


def test_the_docs_show_shares_records() -> None:
    assert len(shown_records()) >= 6


@pytest.mark.parametrize(("where", "shown"), shown_records(), ids=lambda v: str(v)[:40])
def test_a_shares_record_in_the_docs_is_one_the_webhook_writes(where: str, shown: str) -> None:
    record = json.loads(shown)
    assert record in records_written(), f"{where} shows a record no example review gives"
