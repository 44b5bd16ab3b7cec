"""The one line of JSON a taker prints, and how the child that printed it ended: the contract
between the child that takes GPU memory and the parent that judges it, written and read through
this one definition."""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass
from typing import Any, Literal

Stopped = Literal["refused", "exceeded", "error"]
STOPS = ("refused", "exceeded", "error")
ON_GPU = "gpu"
# The platform of a framework that failed before it said where it runs.
UNKNOWN_PLATFORM = "unknown"
# An error is kept to its first line, and that clipped: PyTorch's out-of-memory message alone
# runs to several hundred characters.
ERROR_CHARS = 300


@dataclass(frozen=True)
class TakeResult:
    """What one framework got. `got_mib`: what it held at once when it stopped; `stopped`:
    refused (the framework's out-of-memory error), exceeded (it reached the probe's stop, past
    the share) or error (anything else, the first line in `error`); `total_mib`: the device's
    memory as the framework reports it; `limit_mib`: the framework's own cap where it reports
    one (JAX's bytes_limit, CuPy's pool limit); `platform`: where the framework runs, "gpu"
    unless it fell back (JAX runs on the CPU when its GPU plugin fails)."""

    framework: str
    version: str
    got_mib: int
    stopped: Stopped
    step_mib: int
    error: str = ""
    total_mib: int | None = None
    limit_mib: int | None = None
    platform: str = ON_GPU
    seconds: float = 0.0

    def line(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: Any) -> TakeResult:
        """The result in a decoded JSON object; ValueError naming the field that is wrong."""
        if not isinstance(data, dict):
            raise ValueError("the result is not a JSON object")
        stopped = data.get("stopped")
        if stopped not in STOPS:
            raise ValueError(f"stopped must be one of {', '.join(STOPS)}, not {stopped!r}")
        return cls(
            framework=_text(data, "framework"),
            version=_text(data, "version"),
            got_mib=_count(data, "got_mib"),
            stopped=stopped,
            step_mib=_count(data, "step_mib"),
            error=_text(data, "error"),
            total_mib=_optional_count(data, "total_mib"),
            limit_mib=_optional_count(data, "limit_mib"),
            platform=_text(data, "platform", ON_GPU),
            seconds=_seconds(data),
        )


@dataclass(frozen=True)
class TakerRun:
    """One child's end. `returncode`: negative when a signal killed it, None when it ran past
    its time limit and was killed; `result`: the line it printed, if it printed one;
    `unreadable`: why a line it printed is not a result."""

    framework: str
    returncode: int | None
    result: TakeResult | None
    stderr_tail: str = ""
    seconds: float = 0.0
    unreadable: str = ""

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def signal_name(self) -> str:
        """The signal that killed the child ("SIGABRT"), or "" when none did."""
        if self.returncode is None or self.returncode >= 0:
            return ""
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def read_result(stdout: str) -> TakeResult | None:
    """The result a taker printed: the last line of `stdout` that is a JSON object (a framework
    may print lines of its own before it); None when there is none. ValueError when that line is
    not a result."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        return TakeResult.from_mapping(data)
    return None


def first_line(text: str, limit: int = ERROR_CHARS) -> str:
    """The first non-blank line of `text`, clipped to `limit` characters."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def _text(data: dict[str, Any], key: str, default: str = "") -> str:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


def _count(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} must be a whole number of MiB, not {value!r}")
    return value


def _optional_count(data: dict[str, Any], key: str) -> int | None:
    return None if data.get(key) is None else _count(data, key)


def _seconds(data: dict[str, Any]) -> float:
    value = data.get("seconds", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("seconds must be a number")
    return float(value)
