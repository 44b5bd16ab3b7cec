"""`python -m webhook`: the command line, its subcommands and their exit codes.

Exit codes: 0 success; 1 the policies have problems (lint), an object is denied (review), a
case fails (test), a share does not hold (probe), a template delete fails
(sweep-claim-templates); 2 usage or input errors, reported on stderr in one line each, a probe
with no GPU or nothing to measure, and a scan or sweep that could not read a kind.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from webhook import __version__
from webhook.cli import advertise, probe, sweep
from webhook.cli.errors import USAGE_ERROR, InputError
from webhook.cli.labels import parse_label_list
from webhook.cli.lint import run_lint
from webhook.cli.policy_tests import run_tests
from webhook.cli.review import ReviewOptions, run_review
from webhook.cli.scan import ScanOptions, run_scan
from webhook.kube.label_modes import MODES

PROG = "python -m webhook"
INSTALLED_PROG = "gpu-admission"
DEFAULT_POLICY_DIR = Path("policies")


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    prog: str | None = None,
) -> int:
    """`prog`: the name the command was called by (`python -m webhook` unless given)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    prog = prog or PROG
    parser = build_parser(prog)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            args = parser.parse_args(argv)
    except SystemExit as leaving:
        # argparse has printed the usage and the error (or the help, with code 0).
        return int(leaving.code or 0)
    try:
        if args.command == "lint":
            return run_lint(args.path, stdout=stdout)
        if args.command == "review":
            return run_review(_review_options(args), stdin=stdin, stdout=stdout, stderr=stderr)
        if args.command == "scan":
            scanning = ScanOptions(args.policies, args.cluster, args.output, strict=args.strict)
            return run_scan(scanning, stdout=stdout, stderr=stderr)
        if args.command == "advertise":
            options = advertise.options_from(args)
            return advertise.run_advertise(options, stdout=stdout, stderr=stderr)
        if args.command == "probe":
            return probe.run_probe(probe.options_from(args), stdout=stdout, stderr=stderr)
        if args.command == sweep.COMMAND:
            return sweep.run_sweep(sweep.options_from(args), stdout=stdout, stderr=stderr)
        return run_tests(
            args.paths, args.policies, stdout=stdout, output=args.output, junit=args.junit
        )
    except InputError as error:
        for line in error.lines:
            # Indented lines continue the one before them (the problems under a heading).
            prefix = "" if line.startswith(" ") else f"{prog} {args.command}: "
            stderr.write(f"{prefix}{line}\n")
        return USAGE_ERROR


# What review and scan exit with, alike.
EXIT_CODES = (
    "Exit 0 when nothing is refused; 1 when an object is denied (with --strict, also when a "
    "Warn or Audit policy would deny it); 2 when the input or the policies cannot be read "
    "(for scan, also the cluster)."
)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Tools for GPU admission policies: check them, see what they do to a "
        "manifest and run their test suites without a cluster; and advertise the VRAM of the "
        "nodes they share.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lint = commands.add_parser(
        "lint",
        help="check a policy directory or one policy file",
        description="Load a policy directory as the server would and print every problem as "
        "file:line: field: problem. A file is loaded as a directory holding only it would be. "
        "Exit 0 when it loads, 1 when it has problems.",
    )
    lint.add_argument(
        "path",
        nargs="?",
        type=Path,
        default=DEFAULT_POLICY_DIR,
        metavar="PATH",
        help="the policy directory, or one policy file (default: policies)",
    )

    review = commands.add_parser(
        "review",
        help="show what the webhook does to a manifest or an AdmissionReview",
        description="Answer the objects of a file as the webhook would: the verdict, the "
        "governing policy and the warnings on stderr, the admitted objects (or a diff) on "
        "stdout. Manifests are reviewed as a dry-run CREATE. When an object is refused, "
        "nothing goes to stdout (with -o json: the verdicts, and no items), so that "
        "`... | gpu-admission review -f - | kubectl apply -f -` applies nothing.",
        epilog=EXIT_CODES,
    )
    review.add_argument(
        "-f",
        "--filename",
        dest="file",
        required=True,
        metavar="FILE",
        help="YAML or JSON: a Pod, a workload (Deployment, Job, ...), a List, or an "
        "AdmissionReview; several YAML documents are reviewed one by one; - reads stdin",
    )
    review.add_argument(
        "--policies",
        type=Path,
        default=DEFAULT_POLICY_DIR,
        metavar="DIR",
        help="the policy directory (default: policies)",
    )
    review.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        help="the namespace manifests are created in (default: their metadata.namespace, "
        "else default)",
    )
    review.add_argument(
        "--namespace-labels",
        type=_labels,
        metavar="K=V,...",
        help="the labels of that namespace; without them they are unknown, as on a webhook "
        "that cannot read namespaces",
    )
    review.add_argument(
        "--validate",
        action="store_true",
        help="answer as /validate (checks, never patches) instead of /mutate",
    )
    review.add_argument(
        "--diff", action="store_true", help="print a unified diff of the object's changes"
    )
    review.add_argument(
        "--strict",
        action="store_true",
        help="refuse what a Warn or Audit policy would deny under Enforce, as CI should",
    )
    review.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="how objects are printed (default: yaml); json: a List with the verdict of "
        "each object (allowed, patched, denied, would-deny, not-judged) in input order and "
        "the count refused (with --diff: the diffs alone)",
    )

    test = commands.add_parser(
        "test",
        help="run policy test suites and scenario folders",
        description="Run every gpu-test.yaml suite and every scenario folder under the "
        "paths given; one PASS or FAIL line per case, then a summary. Exit 0 when all "
        "pass, 1 when one fails, 2 when a suite, a scenario or its policies do not load.",
    )
    test.add_argument("paths", nargs="+", type=Path, metavar="DIR", help="where to look")
    test.add_argument(
        "--policies",
        type=Path,
        default=DEFAULT_POLICY_DIR,
        metavar="DIR",
        help="the policies of scenario folders with no policies/ folder above them "
        "(default: policies)",
    )
    test.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="text: a line per case and a summary (default); json: one document with every "
        "case and the totals",
    )
    test.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also write a JUnit XML report of the cases to FILE, for CI",
    )
    advertise.add_parser(commands, DEFAULT_POLICY_DIR)
    probe.add_parser(commands, DEFAULT_POLICY_DIR)
    scan = commands.add_parser(
        "scan",
        help="what the policies would do to a live cluster's pods and workloads",
        description="List every Pod and workload of the cluster (read-only), in the kinds "
        "and versions its discovery serves, and report, for each, what the policies would "
        "do: denied (with the message), would-deny (a Warn or Audit policy lets it through "
        "today), rewritten (the change in one line) or untouched. Kinds the cluster does not "
        "serve, or refuses to list, are named on stderr with the reason.",
        epilog=EXIT_CODES + " A kind the cluster refuses to list makes the scan incomplete: 2.",
    )
    scan.add_argument(
        "--policies",
        type=Path,
        default=DEFAULT_POLICY_DIR,
        metavar="DIR",
        help="the policy directory (default: policies)",
    )
    scan.add_argument(
        "--cluster",
        choices=MODES,
        default="auto",
        help="in-cluster (the pod's service account), kubeconfig (KUBECONFIG or ~/.kube/config), "
        "or auto (in-cluster when in a pod, else the kubeconfig)",
    )
    scan.add_argument("-o", "--output", choices=("table", "json"), default="table")
    scan.add_argument(
        "--strict",
        action="store_true",
        help="count what a Warn or Audit policy would deny under Enforce as denied",
    )
    sweep.add_parser(commands)
    return parser


def _labels(text: str) -> dict[str, str]:
    try:
        return parse_label_list(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _review_options(args: argparse.Namespace) -> ReviewOptions:
    return ReviewOptions(
        file=args.file,
        policies=args.policies,
        mode="validate" if args.validate else "mutate",
        namespace=args.namespace,
        namespace_labels=args.namespace_labels,
        output=args.output,
        diff=args.diff,
        strict=args.strict,
    )
