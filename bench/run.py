"""`python -m bench [--check] [--quick] [--out DIR] [--readme]`: the whole benchmark.

In order: the decision in this process; then over HTTP, with the webhook served as `make run`
serves it and the floor beside it, every scenario kept-alive and with a new TLS connection per
request, at saturation and at fixed rates; the spread of repeated runs; new connections against
the per-connection-TLS baseline; and the workers' memory after enough requests. Exit status:
0 done, 1 a target missed (with --check), 2 nothing worth measuring (a wrong answer, a server
that does not start, wrk missing), 130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from bench import node_scale, report, wrk
from bench.decision import answer_of, time_decision
from bench.growth import WrongAnswer, container_growth, policy_growth
from bench.machine import describe, load_average
from bench.memory import rss_mib
from bench.probe import post_review
from bench.scenarios import Expect, Scenario, answer_problem, build_scenarios, write_reviews
from bench.servers import (
    REPO_ROOT,
    Server,
    ServerError,
    floor_server,
    free_ports,
    per_connection_tls_server,
    webhook_server,
)
from bench.stats import median, ratio
from bench.summary import BEGIN, END, markdown, outcome_records, replace_between_markers, write
from bench.targets import evaluate
from webhook.cli.errors import InputError
from webhook.cli.policies import load_policy_set

DEFAULT_OUT = Path("bench/results")
# Where --readme puts the tables; README.md links to them.
BENCH_README = Path("bench/README.md")


@dataclass(frozen=True)
class Plan:
    quick: bool
    warmup_s: int
    saturation_s: int
    fixed_rate_s: int
    decision_s: float
    memory_requests: int
    spread_runs: int = 5
    tls_runs: int = 3
    edge_runs: int = 5
    rates: tuple[int, ...] = (100, 500, 1000)
    node_sizes: tuple[int, ...] = node_scale.SIZES


FULL = Plan(
    quick=False,
    warmup_s=1,
    saturation_s=5,
    fixed_rate_s=5,
    decision_s=1.0,
    memory_requests=100_000,
)
QUICK = Plan(
    quick=True,
    warmup_s=1,
    saturation_s=2,
    fixed_rate_s=2,
    decision_s=0.3,
    memory_requests=10_000,
    node_sizes=(1_000, 10_000),
)
# Each piece of the serving edge, and the settings that turn it off (webhook/server/settings.py).
EDGE_SWITCHES: dict[str, dict[str, str]] = {
    "the evented front": {"FRONT": "threads"},
    # The whole edge against gunicorn's stock workers (the front runs only in the edge's).
    "the edge, against stock gthread": {"WORKER": "gthread"},
    "the edge, against stock gevent": {"WORKER": "gevent"},
}

# The longest single run that tops up the requests served before memory is read again.
TOP_UP_LIMIT_S = 300


class Refused(Exception):
    """Nothing worth measuring: the figures would mislead."""


class Bench:
    def __init__(self, plan: Plan, out_dir: Path) -> None:
        self.plan = plan
        self.log_dir = out_dir / "logs"
        self.ours: Server | None = None
        self.served = 0  # requests our server answered, over every run
        self.memory: dict[str, dict[int, float | None]] = {}
        settings = asdict(plan) | {
            "saturation_connections": wrk.SATURATION_CONNECTIONS,
            "fixed_rate_connections": wrk.FIXED_RATE_THREADS,
            "wrk_timeout": wrk.TIMEOUT,
        }
        self.figures: dict[str, Any] = {"machine": describe(REPO_ROOT), "settings": settings}

    def run(self) -> dict[str, Any]:
        scenarios = build_scenarios()
        files = write_reviews(scenarios)
        self.decision(scenarios)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        ours_port, floor_port, baseline_port = free_ports(3)
        ours = self.ours = webhook_server(ours_port, self.log_dir)
        floor = floor_server(floor_port, self.log_dir)
        baseline = per_connection_tls_server(baseline_port, self.log_dir)
        gpu_pod = scenarios[0]
        with ExitStack() as running:
            report.section("Servers")
            for server in (ours, floor):
                running.callback(server.stop)
                server.start()
                report.say(f"  {server.name:<10} {server.url}  (log {server.log_file})")
            self.read_memory("start", "at start", ours)
            self.http(ours, floor, scenarios, files)
            self.spread(ours, floor, files[gpu_pod.name])
            running.callback(baseline.stop)
            baseline.start()
            self.tls(ours, baseline, gpu_pod, files[gpu_pod.name])
            baseline.stop()
            self.edge(gpu_pod, files[gpu_pod.name])
            self.memory_after_load(ours, files[gpu_pod.name])
        # After the servers stop: the node side has the machine to itself.
        self.nodes()
        self.figures["machine"]["load_average_end"] = load_average()
        return self.figures

    # In-process

    def decision(self, scenarios: tuple[Scenario, ...]) -> None:
        try:
            policies = load_policy_set(Path("policies"))
        except InputError as error:
            raise Refused(str(error)) from None
        seconds = self.plan.decision_s
        report.section("In-process decision, µs median / p99 (judge + encode apart from decode)")
        found: dict[str, Any] = {}
        for scenario in scenarios:
            answer = answer_of(scenario.body, policies)
            problem = answer_problem(scenario.expect, scenario.uid, answer)
            if problem:
                raise Refused(f"{scenario.name}, judged in-process: {problem}")
            found[scenario.name] = time_decision(scenario.body, policies, seconds).figures()
            case = found[scenario.name]
            report.say(
                f"  {scenario.name:<12} decode {report.timing(case, 'decode_us'):>16}   "
                f"judge + encode {report.timing(case):>16}   ({case['iterations']:,} iterations)"
            )
        pod = scenarios[0].review
        report.section("gpu-pod decision by containers, µs median / p99")
        containers = container_growth(pod, policies, seconds, report.growth_case)
        report.container_growth(containers)
        report.section("gpu-pod decision by policies, µs median / p99 (sets loaded from files)")
        by_policies = policy_growth(pod, seconds, report.growth_case)
        report.policy_growth(by_policies)
        self.figures["decision"] = {
            "scenarios": found,
            "containers": containers,
            "policies": by_policies,
        }

    # Over HTTP

    def probe(self, server: Server, scenario: Scenario, expect: Expect) -> None:
        status, answer = post_review(server.port, scenario.body)
        if server is self.ours:
            self.served += 1
        problem = f"HTTP {status}" if status != 200 else None
        problem = problem or answer_problem(expect, scenario.uid, answer)
        if problem:
            raise Refused(
                f"{server.name} answered {scenario.name} wrongly ({problem}): not measured"
            )

    def saturation(
        self, server: Server, body: Path, mode: wrk.Mode, seconds: int
    ) -> dict[str, Any]:
        return self._counted(server, wrk.saturation(server.url, body, mode, seconds))

    def fixed_rate(self, server: Server, body: Path, mode: wrk.Mode, rate: int) -> dict[str, Any]:
        run = wrk.fixed_rate(server.url, body, mode, rate, self.plan.fixed_rate_s)
        return self._counted(server, run)

    def _counted(self, server: Server, run: dict[str, Any]) -> dict[str, Any]:
        if server is self.ours:
            self.served += int(run["requests"])
        return run

    def http(
        self, ours: Server, floor: Server, scenarios: tuple[Scenario, ...], files: dict[str, Path]
    ) -> None:
        found: dict[str, Any] = {}
        for scenario in scenarios:
            report.section(f"HTTP: {scenario.name}, {scenario.description}")
            self.probe(ours, scenario, scenario.expect)
            self.probe(floor, scenario, "allowed")
            body = files[scenario.name]
            modes: dict[str, Any] = {}
            for mode in wrk.MODES:
                pair: dict[str, Any] = {}
                for name, server in (("ours", ours), ("floor", floor)):
                    self.saturation(server, body, mode, self.plan.warmup_s)
                    if "warm" not in self.memory:
                        self.read_memory("warm", "after warm-up", ours)
                    run = self.saturation(server, body, mode, self.plan.saturation_s)
                    pair[name] = {"saturation": run, "rates": {}}
                ours_run, floor_run = pair["ours"]["saturation"], pair["floor"]["saturation"]
                pair["ours_over_floor"] = ratio(ours_run["rate"], floor_run["rate"])
                report.saturation_pair(
                    f"{mode}, saturation", ours_run, floor_run, pair["ours_over_floor"]
                )
                for rate in self.plan.rates:
                    for name, server in (("ours", ours), ("floor", floor)):
                        pair[name]["rates"][str(rate)] = self.fixed_rate(server, body, mode, rate)
                    report.fixed_rate_pair(
                        f"{mode}, {rate:,}/s",
                        pair["ours"]["rates"][str(rate)],
                        pair["floor"]["rates"][str(rate)],
                    )
                modes[mode] = pair
            found[scenario.name] = modes
        self.figures["http"] = found

    def alternated(
        self, servers: dict[str, Server], body: Path, mode: wrk.Mode, count: int
    ) -> dict[str, dict[str, Any]]:
        """`count` saturation runs on each server, each with new connections, taken in turn so
        that a change in the machine's load falls on all of them; min, median and max."""
        for server in servers.values():
            self.saturation(server, body, mode, self.plan.warmup_s)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        for _ in range(count):
            for name, server in servers.items():
                runs[name].append(self.saturation(server, body, mode, self.plan.saturation_s))
        return {name: spread_figures(found) for name, found in runs.items()}

    def spread(self, ours: Server, floor: Server, body: Path) -> None:
        count = self.plan.spread_runs
        report.section(f"Spread: {count} gpu-pod saturation runs each, kept-alive, taken in turn")
        found: dict[str, Any] = self.alternated(
            {"ours": ours, "floor": floor}, body, "kept-alive", count
        )
        for name in ("ours", "floor"):
            report.spread(name, found[name])
        found["ours_over_floor"] = ratio(found["ours"]["median"], found["floor"]["median"])
        report.ratio_line(
            "ours ÷ floor, medians", found["ours_over_floor"], "(the floor of this run)"
        )
        self.figures["spread"] = found

    def tls(self, ours: Server, baseline: Server, scenario: Scenario, body: Path) -> None:
        count = self.plan.tls_runs
        report.section(
            f"TLS: gpu-pod at saturation, a new TLS connection per request, {count} runs each"
        )
        report.say(f"  baseline   {baseline.url}  (log {baseline.log_file})")
        self.probe(baseline, scenario, scenario.expect)
        servers = {"ours": ours, "baseline": baseline}
        found: dict[str, Any] = self.alternated(servers, body, "new-connection", count)
        for name in servers:
            report.spread(name, found[name])
        found["ratio"] = ratio(found["ours"]["median"], found["baseline"]["median"])
        report.ratio_line("ours ÷ baseline, medians", found["ratio"], "(the baseline of this run)")
        self.figures["tls"] = found

    def edge(self, scenario: Scenario, body: Path) -> None:
        """What each piece of the serving edge buys: ours against ours with that piece off,
        gpu-pod kept-alive at saturation, taken in turn. Both are started afresh for each
        piece, so that neither has served more than the other."""
        count = self.plan.edge_runs
        report.section(f"Edge: gpu-pod kept-alive, ours and ours with one piece off, {count} runs")
        found: dict[str, Any] = {}
        for piece, switches in EDGE_SWITCHES.items():
            ours_port, off_port = free_ports(2)
            pair = {
                "ours": webhook_server(ours_port, self.log_dir, {}, f"ours beside {piece} off"),
                "off": webhook_server(off_port, self.log_dir, switches, f"without {piece}"),
            }
            with ExitStack() as running:
                for server in pair.values():
                    running.callback(server.stop)
                    server.start()
                    self.probe(server, scenario, scenario.expect)
                runs = self.alternated(pair, body, "kept-alive", count)
            bought = ratio(runs["ours"]["median"], runs["off"]["median"])
            found[piece] = {"switches": switches, **runs, "ours_over_off": bought}
            settings = " ".join(f"{name}={value}" for name, value in switches.items())
            report.spread("ours", runs["ours"])
            report.spread(f"{settings}", runs["off"])
            report.ratio_line(f"{piece}: ours ÷ off, medians", bought, "")
        self.figures["edge"] = found

    # Memory

    def nodes(self) -> None:
        report.section(
            "Node scale: the advertiser and the node inventory against a fake API of N nodes"
        )
        with tempfile.TemporaryDirectory() as workdir:
            self.figures["nodes"] = node_scale.measure(
                self.plan.node_sizes, Path(workdir), report=report.say
            )

    def read_memory(self, stage: str, label: str, server: Server) -> None:
        self.memory[stage] = {pid: rss_mib(pid) for pid in server.workers()}
        report.memory_reading(f"RSS {label}, {self.served:,} requests", self.memory[stage])

    def memory_after_load(self, ours: Server, body: Path) -> None:
        report.section("Memory")
        wanted = self.plan.memory_requests
        recent = self.figures["http"]["gpu-pod"]["kept-alive"]["ours"]["saturation"]["rate"]
        while self.served < wanted:
            seconds = min(TOP_UP_LIMIT_S, 1 + math.ceil((wanted - self.served) / max(recent, 50)))
            report.say(f"  {self.served:,} requests so far: gpu-pod at saturation for {seconds} s")
            run = self.saturation(ours, body, "kept-alive", seconds)
            if not run["requests"]:
                raise Refused("the webhook answered nothing while the requests were topped up")
            recent = run["rate"]
        self.read_memory("after", "at the end", ours)
        self.figures["memory"] = memory_figures(self.memory, self.served)


def spread_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [run["rate"] for run in runs]
    middle = median(rates)
    return {
        "runs": runs,
        "rates": rates,
        "min": min(rates),
        "median": middle,
        "max": max(rates),
        "slowest_over_median": ratio(min(rates), middle),
    }


def memory_figures(readings: dict[str, dict[int, float | None]], served: int) -> dict[str, Any]:
    """Per worker: RSS at start, after warm-up and at the end; growth from warm-up to the end.
    A worker that was replaced meanwhile has a reading missing."""
    pids = sorted({pid for stage in readings.values() for pid in stage})
    workers = []
    for pid in pids:
        start, warm, after = (
            readings.get(stage, {}).get(pid) for stage in ("start", "warm", "after")
        )
        growth = None if warm is None or after is None else after - warm
        workers.append(
            {
                "pid": pid,
                "start_mib": start,
                "warm_mib": warm,
                "after_mib": after,
                "growth_mib": growth,
            }
        )
    afters = [worker["after_mib"] for worker in workers if worker["after_mib"] is not None]
    growths = [worker["growth_mib"] for worker in workers if worker["growth_mib"] is not None]
    return {
        "requests_served": served,
        "workers": workers,
        "max_after_mib": max(afters, default=None),
        "max_growth_mib": max(growths, default=None),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--quick", action="store_true", help="shorter runs, for a first look")
    parser.add_argument("--out", type=Path, default=None, help=f"default: {DEFAULT_OUT}/")
    parser.add_argument(
        "--readme",
        action="store_true",
        help=f"put the tables in {BENCH_README} between its bench markers",
    )
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = args.out.resolve() if args.out else REPO_ROOT / DEFAULT_OUT
    os.chdir(REPO_ROOT)
    if shutil.which(wrk.WRK) is None:
        print("bench: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    try:
        (out_dir / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"bench: cannot write to --out {out_dir}: {error}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    plan = QUICK if args.quick else FULL
    try:
        figures = Bench(plan, out_dir).run()
    except (Refused, ServerError, wrk.WrkError, WrongAnswer) as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted; the servers were stopped", file=sys.stderr)
        return 130
    outcomes = evaluate(figures)
    figures["targets"] = outcome_records(outcomes)
    report.outcomes(outcomes)
    summary = markdown(figures)
    json_file, md_file = write(out_dir, figures, summary)
    report.section("Written")
    report.say(f"  {json_file}\n  {md_file}")
    if args.readme:
        update_readme(REPO_ROOT / BENCH_README, summary)
    missed = [outcome for outcome in outcomes if not outcome.passed]
    if args.check and missed:
        report.say(f"\n{len(missed)} of {len(outcomes)} targets missed")
        return 1
    return 0


def update_readme(readme: Path, summary: str) -> bool:
    """Put the tables of a run in `readme` between its bench markers; False, leaving the file
    as it was, when it has none."""
    updated = replace_between_markers(readme.read_text(), summary)
    if updated is None:
        report.say(f"  {readme} has no {BEGIN} ... {END} markers: unchanged")
        return False
    readme.write_text(updated)
    report.say(f"  {readme} (between the bench markers)")
    return True
