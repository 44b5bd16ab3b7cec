"""How every line the server logs is written: as one JSON object (for a log pipeline) or as
gunicorn's text layout (for a terminal), for gunicorn's own messages and the service's alike.

A record may carry structured fields in its `fields` attribute (`extra={"fields": {...}}`):
the JSON layout puts them beside the message, the text layout appends them as key=value.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from webhook.bounded_cache import BoundedMemo

FIELDS_ATTRIBUTE = "fields"
# gunicorn's own time layout, so the service's lines and gunicorn's read alike.
TEXT_TIME_LAYOUT = "[%Y-%m-%d %H:%M:%S %z]"


class _SecondText:
    """The text of a second, made once per second: every line of a second shares it, and a
    line is written per admission."""

    def __init__(self, text_of: Callable[[int], str]) -> None:
        self._text_of = text_of
        self._last: tuple[int, str] = (-1, "")

    def __call__(self, second: int) -> str:
        cached_second, text = self._last
        if second != cached_second:
            text = self._text_of(second)
            self._last = (second, text)
        return text


_utc_second = _SecondText(
    lambda second: datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
)


def rfc3339(timestamp: float) -> str:
    """A Unix time as RFC 3339 in UTC, to the millisecond: 2026-05-04T09:30:00.123Z."""
    second = int(timestamp)
    # Rounded to the microsecond first, as datetime does, then cut to the millisecond.
    micros = round((timestamp - second) * 1e6)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    return f"{_utc_second(second)}.{micros // 1000:03d}Z"


def _fields(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, FIELDS_ATTRIBUTE, None)
    return fields if isinstance(fields, Mapping) else {}


class LineValues(NamedTuple):
    """What a line says, as a record would carry it."""

    created: float
    level: str
    logger: str
    pid: int | None
    message: str
    fields: Mapping[str, Any]

    @classmethod
    def of(cls, record: logging.LogRecord) -> LineValues:
        return cls(
            record.created,
            record.levelname,
            record.name,
            record.process,
            record.getMessage(),
            _fields(record),
        )


# The keys of a JSON line before its fields; a field of the same name replaces its value.
_HEAD_KEYS = frozenset(("time", "level", "logger", "pid", "message"))
# Lines of the same level, logger, process and message share their encoded head.
_HEADS_LIMIT = 64


class JsonFormatter(logging.Formatter):
    # default=str: a field of an unexpected type must not cost the line.
    _encoder = json.JSONEncoder(separators=(",", ":"), default=str)

    def __init__(self) -> None:
        super().__init__()
        self._heads: BoundedMemo[tuple[str, str, int | None, str], str] = BoundedMemo(_HEADS_LIMIT)

    def format(self, record: logging.LogRecord) -> str:
        line = self._line_object(LineValues.of(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return self._encoder.encode(line)

    def render(self, values: LineValues) -> str:
        """The line `format` writes for a record of these values, with no exception."""
        fields = values.fields
        if not fields or not _HEAD_KEYS.isdisjoint(fields):
            return self._encoder.encode(self._line_object(values))
        # A line is written per admission, and all but its time and fields repeat: the rest
        # is encoded once and the line put together from the three.
        created, level, logger, pid, message, _ = values
        head_values = (level, logger, pid, message)
        head = self._heads.get(head_values)
        if head is None:
            head = self._encoder.encode(_head_object(level, logger, pid, message))[1:-1]
            self._heads.put(head_values, head)
        return f'{{"time":"{rfc3339(created)}",{head},{self._encoder.encode(fields)[1:]}'

    @staticmethod
    def _line_object(values: LineValues) -> dict[str, Any]:
        return {
            "time": rfc3339(values.created),
            **_head_object(values.level, values.logger, values.pid, values.message),
            **values.fields,
        }


def _head_object(level: str, logger: str, pid: int | None, message: str) -> dict[str, Any]:
    return {"level": level.lower(), "logger": logger, "pid": pid, "message": message}


class TextFormatter(logging.Formatter):
    """gunicorn's own layout, `[time] [pid] [LEVEL] message`, then the fields as key=value."""

    def __init__(self) -> None:
        super().__init__()
        self._local_time = _SecondText(
            lambda second: time.strftime(TEXT_TIME_LAYOUT, time.localtime(second))
        )

    def formatMessage(self, record: logging.LogRecord) -> str:
        # logging.Formatter.format appends a traceback, if any, to what this returns.
        return self.render(LineValues.of(record))

    def render(self, values: LineValues) -> str:
        """The line `format` writes for a record of these values, with no exception."""
        time_text = self._local_time(int(values.created))
        head = f"{time_text} [{values.pid}] [{values.level}] {values.message}"
        return _with_pairs(head, values.fields)


def _with_pairs(text: str, fields: Mapping[str, Any]) -> str:
    # One loop, no call per value: a line is written per admission.
    parts = [text]
    for key, value in fields.items():
        if isinstance(value, str):
            # Quoted when it is empty or holds a space, a quote, an equals sign or any other
            # character that does not print (every other whitespace is one).
            if not value.isprintable() or not value or " " in value or '"' in value or "=" in value:
                value = json.dumps(value)
        elif value is None:
            value = "null"
        elif value is True or value is False:
            value = "true" if value else "false"
        else:
            value = str(value)
        parts.append(f"{key}={value}")
    return " ".join(parts)


LineFormatter = JsonFormatter | TextFormatter


def formatter_for(log_format: str) -> LineFormatter:
    return JsonFormatter() if log_format == "json" else TextFormatter()
