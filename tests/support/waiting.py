"""Waiting for something another thread or process does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float = 5.0, interval: float = 0.01) -> T:
    """The first truthy value of `check()`, polled until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {check}")
        time.sleep(interval)
