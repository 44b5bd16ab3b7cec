"""What a person reads after a probe: a table with one row per framework and a closing line,
or the same as one JSON document for a pipeline to keep."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.probe.judge import Judgement, holds
from webhook.probe.share import Share

COLUMNS = ("FRAMEWORK", "VERSION", "GOT MiB", "SHARE MiB", "LIMIT HELD", "ALIVE", "NOTE")


def table(share: Share, env: Mapping[str, str], judgements: Sequence[Judgement]) -> str:
    lines = [f"share: {share.describe()}"]
    if env:
        lines.append("env:   " + " ".join(f"{name}={value}" for name, value in sorted(env.items())))
    rows = [COLUMNS] + [_row(judgement) for judgement in judgements]
    widths = [max(len(row[column]) for row in rows) for column in range(len(COLUMNS))]
    lines.append("")
    for row in rows:
        cells = [cell.ljust(widths[column]) for column, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines.append(verdict_line(judgements))
    return "\n".join(lines) + "\n"


def verdict_line(judgements: Sequence[Judgement]) -> str:
    if holds(judgements):
        names = ", ".join(judgement.framework for judgement in judgements)
        return f"the share holds for {names}"
    failed = [f"{j.framework} ({j.verdict})" for j in judgements if not j.passed]
    return f"the share does not hold for {', '.join(failed)}"


def document(share: Share, env: Mapping[str, str], judgements: Sequence[Judgement]) -> str:
    frameworks = [_entry(judgement) for judgement in judgements]
    body = {
        "share": share.summary(),
        "env": dict(sorted(env.items())),
        "holds": holds(judgements),
        "frameworks": frameworks,
    }
    return json.dumps(body, indent=2) + "\n"


def _row(judgement: Judgement) -> tuple[str, ...]:
    got = "-" if judgement.got_mib is None else str(judgement.got_mib)
    result = judgement.run.result
    if result is not None and result.stopped == "exceeded":
        got = f">={got}"  # the probe stopped it there
    return (
        judgement.framework,
        judgement.version or "-",
        got,
        str(judgement.share_mib),
        "yes" if judgement.held else "no",
        "yes" if judgement.alive else "no",
        f"{judgement.verdict}: {judgement.note}",
    )


def _entry(judgement: Judgement) -> dict[str, Any]:
    run = judgement.run
    result = run.result
    return {
        "framework": judgement.framework,
        "version": judgement.version,
        "verdict": judgement.verdict,
        "held": judgement.held,
        "alive": judgement.alive,
        "gotMiB": judgement.got_mib,
        "shareMiB": judgement.share_mib,
        "marginMiB": judgement.margin_mib,
        "note": judgement.note,
        "stopped": result.stopped if result else None,
        "error": result.error if result else None,
        "platform": result.platform if result else None,
        "totalMiB": result.total_mib if result else None,
        "limitMiB": result.limit_mib if result else None,
        "returncode": run.returncode,
        "seconds": run.seconds,
        "stderrTail": run.stderr_tail,
    }
