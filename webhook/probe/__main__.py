"""`python -m webhook.probe run`: probe a share on this node with the frameworks installed here,
given the share's MiB, the share file `gpu-admission probe --render-only` wrote, or the pod's own
annotations. Standard library only, for the framework images it runs in (deploy/probe/)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from webhook.probe.gpu import missing_gpu
from webhook.probe.session import (
    CANNOT_PROBE,
    CannotProbe,
    add_run_options,
    probe,
    run_options,
)
from webhook.probe.share import (
    MIB_PER_UNIT,
    Share,
    ShareError,
    read_annotations_share,
    read_share_file,
)
from webhook.probe.takers import positive_int

PROG = "python -m webhook.probe"
INTERRUPTED = 130


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Whether a share of a GPU holds on this node: each installed framework "
        "takes memory with the share's env until it is refused, and is judged against the "
        "share. Exit 0 when the share holds for every framework, 1 when it does not hold for "
        "one, 2 when there is no NVIDIA GPU here or the usage is wrong.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="probe a share on this node",
        description="Run each framework's taker in turn with the share's env, judge what it "
        "got against the share, and print a table (or --json).",
    )
    share = run.add_mutually_exclusive_group(required=True)
    share.add_argument(
        "--share-mib", type=positive_int, metavar="N", help="the share, in MiB; no env is added"
    )
    share.add_argument(
        "--share-file",
        type=Path,
        metavar="FILE",
        help="the JSON that `gpu-admission probe --render-only` writes: shareMiB and env",
    )
    share.add_argument(
        "--annotations",
        type=Path,
        metavar="PATH",
        help="a downward-API file of this pod's annotations: the share is read from the "
        "webhook's shares record, and the env is this container's own",
    )
    run.add_argument(
        "--container",
        metavar="NAME",
        help="with --annotations: whose share, where the record holds several",
    )
    run.add_argument(
        "--vram-unit",
        choices=sorted(MIB_PER_UNIT),
        default="MiB",
        help="with --annotations: the policy's unit, for records that give the share in it "
        "alone (default: MiB)",
    )
    add_run_options(run)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    find_missing_gpu: Callable[[], str | None] = missing_gpu,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            args = parser.parse_args(argv)
            if args.annotations is None and (args.container or args.vram_unit != "MiB"):
                parser.error("--container and --vram-unit apply to --annotations only")
    except SystemExit as leaving:
        # argparse has printed the usage and the error (or the help, with code 0).
        return int(leaving.code or 0)
    try:
        return probe(
            _share(args),
            run_options(args),
            stdout=stdout,
            stderr=stderr,
            find_missing_gpu=find_missing_gpu,
        )
    except (CannotProbe, ShareError) as error:
        stderr.write(f"{PROG} {args.command}: {error}\n")
        return CANNOT_PROBE


def _share(args: argparse.Namespace) -> Share:
    if args.share_file is not None:
        return read_share_file(args.share_file)
    if args.annotations is not None:
        return read_annotations_share(
            args.annotations, container=args.container, unit=args.vram_unit
        )
    return Share(args.share_mib)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)
