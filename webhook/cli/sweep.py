"""`gpu-admission sweep-claim-templates`: one pass of the sweep that removes the DRA shares'
ResourceClaimTemplates nobody uses any more (webhook/cli/template_sweep.py says when that is
safe), as the CronJob of deploy/base runs it every ten minutes.

It prints a line per template removed and a summary on stdout, and on stderr the kinds it could
not read and the deletes that failed. Exit codes: 0 the pass is done; 1 a delete failed; 2 no
cluster, the templates could not be listed, or a kind could not be read (then nothing is
deleted), or a bad option.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, TextIO

from webhook.cli.errors import InputError
from webhook.cli.scan import PAGE_SIZE

COMMAND = "sweep-claim-templates"
CLUSTER_MODES = ("auto", "in-cluster", "kubeconfig")
# How long a template nobody names is kept after it was last needed (at least 120 s; see
# template_sweep.py): a setting, --grace.
DEFAULT_GRACE_SECONDS = 600.0
# What to do about an answer that is no list, by its HTTP status.
_HINTS = {
    401: "; the credentials were refused: check the kubeconfig's user or token",
    403: "; the sweep may only list what the ClusterRole gpu-claim-template-sweep grants "
    "(deploy/base/claim-template-sweep-rbac.yaml): bind it to whoever runs the sweep",
    410: "; the list changed while it was read page by page: the next pass reads it again",
}


@dataclass(frozen=True)
class SweepOptions:
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    dry_run: bool = False
    mode: str = "auto"
    page_size: int = PAGE_SIZE


def add_parser(commands: Any) -> None:
    sweep = commands.add_parser(
        COMMAND,
        help="remove the DRA ResourceClaimTemplates that no Pod or workload names any more",
        description="One pass over the ResourceClaimTemplates the webhook made (labelled "
        "app.kubernetes.io/managed-by=gpu-admission): each that no Pod or workload of the "
        "cluster names, and that nobody needed within the grace, is deleted, unless it changed "
        "since it was read. Every kind the webhook rewrites is listed across namespaces; where "
        "one is not served or cannot be read, nothing is deleted.",
        epilog="Exit 0 when the pass is done; 1 when a delete failed; 2 when there is no "
        "cluster, the templates cannot be listed or a kind cannot be read (then nothing is "
        "deleted).",
    )
    sweep.add_argument(
        "--grace",
        type=_seconds,
        default=DEFAULT_GRACE_SECONDS,
        metavar="SECONDS",
        help="how long an unused template is kept after it was last needed, at least 120 "
        f"(default: {DEFAULT_GRACE_SECONDS:g})",
    )
    sweep.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be removed, and delete nothing",
    )
    sweep.add_argument(
        "--cluster",
        choices=CLUSTER_MODES,
        default="auto",
        help="in-cluster (the pod's service account), kubeconfig (KUBECONFIG or ~/.kube/config), "
        "or auto (in-cluster when in a pod, else the kubeconfig)",
    )


def options_from(args: argparse.Namespace) -> SweepOptions:
    return SweepOptions(grace_seconds=args.grace, dry_run=args.dry_run, mode=args.cluster)


def run_sweep(options: SweepOptions, *, stdout: TextIO, stderr: TextIO) -> int:
    # Imported here: importing them loads the Kubernetes client, which the offline commands
    # never need.
    from webhook.cli.scan import api_get, cluster_client
    from webhook.cli.template_sweep import MIN_GRACE_SECONDS, api_delete, sweep

    if not options.grace_seconds >= MIN_GRACE_SECONDS:
        raise InputError(
            f"--grace {options.grace_seconds:g} is shorter than {MIN_GRACE_SECONDS:g} seconds, "
            "the longest an admission may take to store its object after the template's stamp"
        )
    client = cluster_client(options.mode, "sweep")
    try:
        report = sweep(
            api_get(client, _HINTS),
            api_delete(client),
            grace_seconds=options.grace_seconds,
            dry_run=options.dry_run,
            page_size=options.page_size,
        )
    finally:
        client.close()
    removed = "would remove" if options.dry_run else "removed"
    for template in sorted(report.removed):
        stdout.write(f"{removed} ResourceClaimTemplate {template}\n")
    for kind, why in report.unread.items():
        stderr.write(f"{kind} not read, so nothing is deleted: {why}\n")
    for skipped in report.skipped:
        stderr.write(f"skipped ResourceClaimTemplate {skipped.template}: {skipped.reason}\n")
    for failure in report.failed:
        stderr.write(
            f"could not delete ResourceClaimTemplate {failure.template}: {failure.reason}\n"
        )
    stdout.write(report.summary() + "\n")
    if report.unread:
        return 2
    return 1 if report.failed else 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds")
    return value
