"""What a newcomer reads first: README.md's contents lead to every section, its links reach
files that exist, it calls the tool one way, and `make help` names every target."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from webhook.cli.admit import admit
from webhook.cli.main import main
from webhook.cli.policies import load_policy_set
from webhook.policy.namespace_labels import StaticNamespaceLabels

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
PAGES = [README, REPO_ROOT / "bench" / "README.md"]
CODE_BLOCK = re.compile(r"^ *```.*?^ *```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(page: Path) -> str:
    """The page without its code blocks, whose `#` lines are comments, not headings."""
    return CODE_BLOCK.sub("", page.read_text())


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(page: Path, level: str = "#{1,6}") -> list[str]:
    return re.findall(rf"^{level} (.+)$", prose(page), re.MULTILINE)


def test_the_contents_lead_to_every_section() -> None:
    text = prose(README)
    contents = text.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    linked = {target.removeprefix("#") for target in LINK.findall(contents)}
    sections = {anchor(heading) for heading in headings(README, "##")} - {"contents"}
    assert sections - linked == set()


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(REPO_ROOT)) for page in PAGES])
def test_every_link_reaches_a_section_or_a_file(page: Path) -> None:
    sections = {anchor(heading) for heading in headings(page)}
    broken = []
    for target in LINK.findall(prose(page)):
        if target.startswith(("http://", "https://")):
            continue
        path, _, section = target.partition("#")
        reached = (page.parent / path).exists() if path else section in sections
        if not reached:
            broken.append(target)
    assert broken == []


def test_the_readme_calls_the_tool_by_its_command_name() -> None:
    """`gpu-admission ...`, never `python -m webhook ...` (`python -m webhook.certs` is another
    module, not the command)."""
    assert re.findall(r"python3? -m webhook(?![.\w])", README.read_text()) == []


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_names_every_target_with_a_line() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    phony = {
        name
        for line in makefile.splitlines()
        if line.startswith(".PHONY:")
        for name in line.split(":", 1)[1].split()
    }
    shown = subprocess.run(
        ["make", "--no-print-directory", "-s", "help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    listed = dict(line.split(None, 2)[1:] for line in shown.splitlines())
    assert set(listed) == phony
    assert all(listed.values())


def _block_after(marker: str) -> list[str]:
    """The lines of the first code block after `marker` in README.md, unindented."""
    text = README.read_text().split(marker, 1)[1]
    block = CODE_BLOCK.search(text)
    assert block is not None, marker
    return [line.strip() for line in block.group(0).splitlines()[1:-1]]


def test_the_walks_decoded_patch_is_the_servers_answer() -> None:
    """Step 2 shows the patch the curl command prints: the server's own, operation by operation."""
    body = (REPO_ROOT / "examples" / "review-fractional-pod.json").read_bytes()
    labels = StaticNamespaceLabels(reason="none")
    verdict = admit(body, load_policy_set(REPO_ROOT / "policies"), "mutate", labels).verdict
    encoded = verdict.response_members()["patch"]  # as the server puts it in its answer
    answered = [json.dumps(op) for op in json.loads(base64.b64decode(encoded))]
    assert _block_after("2. **Send a review.**") == answered


def test_the_walks_review_shows_what_review_prints() -> None:
    """Step 3's verdict lines are the command's own stderr."""
    shown = _block_after("3. **Review manifests without a server.**")
    assert shown[0] == "$ gpu-admission review -f examples/policies/pods.yaml"
    err = io.StringIO()
    main(["review", "-f", "examples/policies/pods.yaml"], stdout=io.StringIO(), stderr=err)
    printed = [line.strip() for line in err.getvalue().splitlines()]
    said = shown[1 : shown.index("apiVersion: v1")]
    assert printed[: len(said)] == said
