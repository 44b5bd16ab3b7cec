"""`python -m webhook lint|review|test|scan|advertise|probe`, or the installed `gpu-admission`:
the command line (webhook/cli/)."""

from __future__ import annotations

import os
import sys

from webhook.cli.main import INSTALLED_PROG, main

INTERRUPTED = 130


def run(prog: str | None = None) -> int:
    try:
        return main(prog=prog)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, and keep Python from complaining
        # about the stdout it can no longer flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def command() -> None:
    """The `gpu-admission` console script."""
    sys.exit(run(INSTALLED_PROG))


if __name__ == "__main__":
    sys.exit(run())
