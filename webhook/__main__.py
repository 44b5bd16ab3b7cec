"""`python -m webhook lint|review|test|advertise`: the command line (webhook/cli/)."""

from __future__ import annotations

import os
import sys

from webhook.cli.main import main

INTERRUPTED = 130


def run() -> int:
    try:
        return main()
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, and keep Python from complaining
        # about the stdout it can no longer flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(run())
