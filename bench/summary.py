"""What a run leaves behind: latest.json with every figure, latest.md with the tables, and, on
request, those tables in bench/README.md between its bench markers. A missed target is named
before the tables, with its figure, so that no reader takes a FAIL row for a result."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bench.report import errors, latencies, number, times, timing
from bench.targets import Outcome

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
# A marker counts only on a line of its own, so prose may quote it.
_MARKER_LINE = "^{}$"


def outcome_records(found: Iterable[Outcome]) -> list[dict[str, Any]]:
    return [
        {
            "name": outcome.target.name,
            "figure": outcome.target.figure,
            "value": outcome.value,
            "comparison": outcome.target.comparison,
            "limit": outcome.target.limit,
            "unit": outcome.target.unit,
            "errors": outcome.errors,
            "passed": outcome.passed,
            "reason": outcome.reason,
        }
        for outcome in found
    ]


def write(out_dir: Path, figures: Mapping[str, Any], markdown_text: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_file, md_file = out_dir / "latest.json", out_dir / "latest.md"
    json_file.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
    md_file.write_text(markdown_text)
    return json_file, md_file


def replace_between_markers(text: str, content: str) -> str | None:
    """`text` with what lies between the bench markers replaced by `content`; None when the
    markers are missing or out of order."""
    begin = re.search(_MARKER_LINE.format(re.escape(BEGIN)), text, re.MULTILINE)
    end = re.search(_MARKER_LINE.format(re.escape(END)), text, re.MULTILINE)
    if begin is None or end is None or end.start() < begin.end():
        return None
    return f"{text[: begin.end()]}\n{content.rstrip()}\n{text[end.start() :]}"


def _table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _rate_cell(run: Mapping[str, Any]) -> str:
    return f"{number(run['rate'], 0)}{errors(run)}"


def _latency_cell(run: Mapping[str, Any]) -> str:
    return f"{latencies(run)} ({number(run['rate'], 0)}/s){errors(run)}"


def markdown(figures: Mapping[str, Any]) -> str:
    machine, settings = figures["machine"], figures["settings"]
    lines = [
        f"Measured {machine['date']} at commit {machine['commit']}"
        + (" with uncommitted changes" if machine["uncommitted_changes"] else "")
        + f" on {machine['cpu']} ({machine['cpu_count']} CPUs, shared by wrk and the server), "
        f"Python {machine['python']}, {machine['wrk']}"
        + (", quick run" if settings["quick"] else "")
        + ". Floor: the same gunicorn and TLS answering every review allowed without judging it.",
        "",
    ]
    lines += _missed(figures.get("targets", []))
    http = figures.get("http", {})
    if http:
        lines += ["Saturation, admissions/s (4 connections):", ""]
        rows = []
        for scenario, modes in http.items():
            for mode, pair in modes.items():
                ours, floor = pair["ours"]["saturation"], pair["floor"]["saturation"]
                ratio = times(pair["ours_over_floor"])
                rows.append([scenario, mode, _rate_cell(ours), _rate_cell(floor), ratio])
        lines += _table(["scenario", "connections", "ours", "floor", "ours ÷ floor"], rows)
        lines += ["", "Latency at fixed rates, ms p50/p90/p99 from the scheduled time (achieved):"]
        lines += [""]
        rows = []
        for scenario, modes in http.items():
            for mode, pair in modes.items():
                for rate, ours in pair["ours"]["rates"].items():
                    floor = pair["floor"]["rates"][rate]
                    cells = [_latency_cell(ours), _latency_cell(floor)]
                    rows.append([scenario, mode, f"{int(rate):,}/s", *cells])
        lines += _table(["scenario", "connections", "rate", "ours", "floor"], rows)
    lines += _spread_and_tls(figures)
    lines += _decision(figures.get("decision", {}))
    lines += _memory(figures.get("memory"))
    lines += nodes_section(figures.get("nodes"))
    if figures.get("targets"):
        rows = [
            [
                target["name"],
                f"{number(target['value'], 2)} {target['unit']}",
                f"{target['comparison']} {target['limit']:,} {target['unit']}",
                ("PASS" if target["passed"] else "FAIL")
                + (f" ({target['reason']})" if target["reason"] else ""),
            ]
            for target in figures["targets"]
        ]
        lines += ["", "Targets (a figure from a run with errors fails):", ""]
        lines += _table(["target", "figure", "limit", "result"], rows)
    return "\n".join(lines) + "\n"


def _missed(targets: list[Mapping[str, Any]]) -> list[str]:
    """The targets this run missed, each with its figure and limit, said in words before any
    table; or that every target was met."""
    if not targets:
        return []
    missed = [target for target in targets if not target["passed"]]
    if not missed:
        return [f"All {len(targets)} targets met (the last table).", ""]
    lines = [
        f"**{len(missed)} of {len(targets)} targets missed** in this run (FAIL in the last table):",
        "",
    ]
    for target in missed:
        unit = target["unit"]
        reason = f" ({target['reason']})" if target["reason"] else ""
        lines.append(
            f"- {target['name']}: {number(target['value'], 2)} {unit}, where the target is "
            f"{target['comparison']} {target['limit']:,} {unit}{reason}"
        )
    return [*lines, ""]


def _runs_row(name: str, found: Mapping[str, Any]) -> list[str]:
    return [
        name,
        number(found["min"], 0),
        number(found["median"], 0),
        number(found["max"], 0),
        times(found["slowest_over_median"]) + "".join(errors(run) for run in found["runs"]),
    ]


def _spread_and_tls(figures: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    header = ["server", "min", "median", "max", "slowest ÷ median"]
    spread = figures.get("spread")
    if spread:
        count = len(spread["ours"]["runs"])
        lines += ["", f"gpu-pod at saturation, kept-alive, {count} runs each taken in turn:", ""]
        lines += _table(header, [_runs_row(name, spread[name]) for name in ("ours", "floor")])
        lines += ["", f"Ours ÷ floor, medians: {times(spread['ours_over_floor'])}."]
    tls = figures.get("tls")
    if tls:
        count = len(tls["ours"]["runs"])
        lines += [
            "",
            f"gpu-pod at saturation with a new TLS connection per request, {count} runs each:",
            "",
        ]
        names = {"ours": "ours", "baseline": "per-connection-TLS baseline"}
        lines += _table(header, [_runs_row(label, tls[name]) for name, label in names.items()])
        lines += ["", f"Ours ÷ baseline, medians: {times(tls['ratio'])}."]
    lines += _edge(figures.get("edge"))
    return lines


def _edge(edge: Mapping[str, Any] | None) -> list[str]:
    """What each piece of the serving edge buys: ours ÷ ours with that piece off."""
    if not edge:
        return []
    rows = []
    for piece, found in edge.items():
        switches = " ".join(f"`{name}={value}`" for name, value in found["switches"].items())
        rows.append(
            [
                piece,
                switches,
                number(found["ours"]["median"], 0),
                number(found["off"]["median"], 0),
                times(found["ours_over_off"]),
            ]
        )
    header = ["piece", "turned off by", "ours, median /s", "off, median /s", "ours ÷ off"]
    return [
        "",
        "What each piece of the serving edge buys (gpu-pod, kept-alive, runs taken in turn):",
        "",
        *_table(header, rows),
    ]


def _decision(decision: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    if "scenarios" in decision:
        lines += ["", "In-process decision, µs median / p99:", ""]
        rows = [
            [name, timing(case, "decode_us"), timing(case)]
            for name, case in decision["scenarios"].items()
        ]
        lines += _table(["scenario", "decode", "judge + encode"], rows)
    if "containers" in decision:
        growth = decision["containers"]
        rows = [[count, timing(case)] for count, case in growth["cases"].items()]
        lines += ["", "gpu-pod decision by containers (judge + encode, µs median / p99):", ""]
        lines += _table(["containers", "decision"], rows)
        lines += [
            "",
            f"Per container: {number(growth['slope_1_10_us'], 2)} µs from 1 to 10, "
            f"{number(growth['slope_10_100_us'], 2)} µs from 10 to 100 "
            f"(ratio {times(growth['slope_ratio'])}).",
        ]
    if "policies" in decision:
        growth = decision["policies"]
        rows = [
            [
                f"{int(size):,}",
                number(case["load_s"], 2),
                timing(case["glob"]),
                timing(case["exact"]),
            ]
            for size, case in growth["cases"].items()
        ]
        lines += ["", "gpu-pod decision by policies (µs median / p99):", ""]
        header = ["policies", "load, s", "namespace matched by a glob", "by an exact name"]
        lines += _table(header, rows)
        lines += [
            "",
            f"1,000 policies ÷ 1: {times(growth['ratio'])} (glob), "
            f"{times(growth['exact_ratio'])} (exact name).",
        ]
    return lines


def _memory(memory: Mapping[str, Any] | None) -> list[str]:
    if not memory:
        return []
    served = f"{memory['requests_served']:,}"
    rows = [
        [
            str(worker["pid"]),
            number(worker["start_mib"]),
            number(worker["warm_mib"]),
            number(worker["after_mib"]),
            number(worker["growth_mib"]),
        ]
        for worker in memory["workers"]
    ]
    header = ["worker", "start", "after warm-up", f"after {served} requests", "growth"]
    return ["", "Resident memory per worker, MiB:", "", *_table(header, rows)]


def nodes_section(nodes: Mapping[str, Any] | None) -> list[str]:
    if not nodes:
        return []
    rows = []
    for size, found in nodes["sizes"].items():
        first, second, inventory = found["first"], found["second"], found["inventory"]
        rows.append(
            [
                f"{int(size):,}",
                f"{number(first['seconds'])} s, {number(first.get('patches_per_second'))}/s",
                f"{number(first.get('cpu_seconds'))} s",
                number(first["peak_rss_mib"]),
                f"{number(second['seconds'])} s, {number(second['peak_rss_mib'])} MiB",
                f"{number(inventory.get('list_seconds'))} s, "
                f"{number(inventory['peak_rss_mib'])} MiB",
            ]
        )
    header = [
        "nodes (half in the pool)",
        "first pass, patches/s",
        "its CPU",
        "its peak RSS, MiB",
        "second pass",
        "node inventory: list, peak RSS",
    ]
    serial = nodes["serial"]
    lines = ["", "The node side at cluster scale (`python -m bench.node_scale`):", ""]
    lines += _table(header, rows)
    lines += [
        "",
        f"Baseline, {serial['nodes']:,} nodes one patch at a time: "
        f"{number(serial['first']['seconds'])} s, "
        f"{number(serial['first'].get('patches_per_second'))} patches/s; in parallel ÷ one at "
        f"a time: {times(nodes.get('parallel_over_serial'))}. Peak RSS per node between the "
        f"smallest and the largest size: {nodes.get('bytes_per_node', '—')} B.",
    ]
    return lines
