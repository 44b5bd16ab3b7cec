"""`python -m webhook.probe.take`: the entry point of the child a runner starts per framework
(webhook/probe/takers.py), a module of its own so that `-m` runs it as the main program."""

from __future__ import annotations

import sys

from webhook.probe.takers import main

if __name__ == "__main__":
    sys.exit(main())
