"""The report printed as the run goes: one section per measurement, each ratio next to the
baseline it was measured against in the same run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bench.targets import Outcome


def say(text: str = "") -> None:
    print(text, flush=True)


def section(title: str) -> None:
    say()
    say(f"== {title} ==")


def number(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:
        return "n/a"
    return f"{value:,.{digits}f}"


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def errors(run: Mapping[str, Any]) -> str:
    """ "" for a clean run, else what went wrong, to print next to its figure."""
    if not run.get("error_count"):
        return ""
    kinds = ", ".join(f"{count} {kind}" for kind, count in run["errors"].items() if count)
    return f" [ERRORS: {kinds}]"


def rate(run: Mapping[str, Any]) -> str:
    return f"{number(run['rate'], 0)}/s{errors(run)}"


def latencies(run: Mapping[str, Any]) -> str:
    latency = run["latency_ms"]
    return "/".join(number(latency[key], 2) for key in ("p50", "p90", "p99"))


def timing(case: Mapping[str, Any], key: str = "decide_us") -> str:
    return f"{number(case[key]['median'])} / {number(case[key]['p99'])}"


# Sections


def container_growth(growth: Mapping[str, Any]) -> None:
    say(
        f"  per container: {number(growth['slope_1_10_us'], 2)} µs from 1 to 10, "
        f"{number(growth['slope_10_100_us'], 2)} µs from 10 to 100; "
        f"slope 10→100 ÷ slope 1→10 = {times(growth['slope_ratio'])} "
        f"(linear: about 1); 100 containers ÷ 1 = {times(growth['ratio_100_over_1'])}"
    )


def growth_case(label: str, case: Mapping[str, Any]) -> None:
    if "glob" in case:
        glob, exact = case["glob"], case["exact"]
        say(
            f"  {label:<14} loaded in {number(case['load_s'], 2)} s; "
            f"{glob['namespace']} → {glob['policy']}: {timing(glob)}; "
            f"{exact['namespace']} → {exact['policy']}: {timing(exact)}"
        )
    else:
        say(f"  {label:<14} {timing(case)}")


def policy_growth(growth: Mapping[str, Any]) -> None:
    say(
        f"  1,000 policies ÷ 1 policy: {times(growth['ratio'])} (namespace matched by a glob), "
        f"{times(growth['exact_ratio'])} (by an exact name)"
    )


LABEL = 26


def saturation_pair(
    label: str, ours: Mapping[str, Any], floor: Mapping[str, Any], ours_over_floor: float | None
) -> None:
    say(f"  {label:<{LABEL}} ours  {rate(ours)}  p50/p90/p99 {latencies(ours)} ms")
    say(
        f"  {'':<{LABEL}} floor {rate(floor)}  p50/p90/p99 {latencies(floor)} ms"
        f"   ours ÷ floor {times(ours_over_floor)} (the floor of this run)"
    )


def fixed_rate_pair(label: str, ours: Mapping[str, Any], floor: Mapping[str, Any]) -> None:
    def one(run: Mapping[str, Any]) -> str:
        behind = f", {run['behind']:,} sent late" if run.get("behind") else ""
        return f"p50/p90/p99 {latencies(run)} ms, achieved {rate(run)}{behind}"

    say(f"  {label:<{LABEL}} ours  {one(ours)}")
    say(f"  {'':<{LABEL}} floor {one(floor)}")


def ratio_line(label: str, value: float | None, baseline: str) -> None:
    say(f"  {label:<{LABEL}} {times(value)} {baseline}")


def spread(name: str, figures: Mapping[str, Any]) -> None:
    rates = ", ".join(number(value, 0) for value in figures["rates"])
    flagged = "".join(errors(run) for run in figures["runs"])
    say(
        f"  {name:<{LABEL}} runs {rates}/s: min {number(figures['min'], 0)}, "
        f"median {number(figures['median'], 0)}, max {number(figures['max'], 0)}; "
        f"slowest ÷ median {times(figures['slowest_over_median'])}{flagged}"
    )


def memory_reading(label: str, readings: Mapping[int, float | None]) -> None:
    parts = ", ".join(f"worker {pid}: {number(mib)} MiB" for pid, mib in readings.items())
    say(f"  {label:<34} {parts or 'no workers found'}")


def outcomes(found: Iterable[Outcome]) -> None:
    section("Targets")
    for outcome in found:
        target = outcome.target
        verdict = "PASS" if outcome.passed else "FAIL"
        figure = number(outcome.value, 2)
        reason = f" ({outcome.reason})" if outcome.reason else ""
        say(
            f"  {verdict}  {target.name}: {figure} {target.unit}, "
            f"{target.comparison} {target.limit:,} {target.unit}{reason}"
        )
