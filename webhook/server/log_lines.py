"""Lines the service logs at every request, written straight to the streams behind its handlers.

An admission writes a line, so under load the logging module's work per line (a LogRecord,
the dispatch through logger and handler, the formatter reading the record back) costs as much
as judging a pod. Where every handler is a plain stream handler (gunicorn's stderr or its log
file) with one of the service's layouts and no filter, the line is rendered from its values and
written under the handler's own lock, as the handler itself would write it. With any other
handler (syslog, one from a logging config) each line is a LogRecord, as usual.

A worker may also hold its lines for a moment and write them together (`hold`), as klog and
Envoy do with theirs: a write per line lets the worker's other threads take the interpreter
in the middle of every request. A held line keeps only its values; it is laid out when it is
written, in a batch with the others, which costs less than a line at a time. Held lines are
written as soon as HELD_LINES_LIMIT of them wait (by the request that brings the last), every
`seconds` (by a thread of their own), before any record the same handlers write (so the log
keeps its order), and when holding stops; in writes of whole lines of at most PIPE_BUF bytes,
which a pipe shared by several processes keeps whole (a longer line goes alone).
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.periodically import Periodically
from webhook.server.log_format import FIELDS_ATTRIBUTE, LineFormatter, LineValues

_PLAIN_STREAM_HANDLERS = (logging.StreamHandler, logging.FileHandler)
# What one write to a pipe keeps whole when several processes write to it (POSIX: 512 at least).
PIPE_BUF = getattr(select, "PIPE_BUF", 512)
# Held lines that the request bringing the last lays out and writes, about a millisecond's work.
# Measured: letting the writer's thread lay out a second's lines at once made the requests that
# came meanwhile wait on the interpreter, and tripled p99 at 1,000 admissions/s.
HELD_LINES_LIMIT = 64

# A line's fields, or what makes them: called when the line is rendered, which for a held line
# is when it is written.
Fields = Mapping[str, Any] | Callable[[], Mapping[str, Any]]
# What a held line keeps: when it was logged, its logger's name, its message and fields.
_HeldLine = tuple[float, str, str, Fields]


class _Stream:
    def __init__(self, handler: logging.StreamHandler[Any], layout: LineFormatter):
        self.handler = handler
        self.layout = layout
        # Changed and read under the handler's lock, so that no line is held after the last
        # write of what is held.
        self.holding = False
        # Lines not yet written: while holding, up to HELD_LINES_LIMIT of them; otherwise
        # only those on their way out at once.
        self._held: list[_HeldLine] = []
        # Taken by whoever writes, for as long as it renders and writes: lines go out in the
        # order they came.
        # Reentrant, so that a batch whose rendering logs through the same handlers does not
        # hang the thread (that record's filter writes the lines held since, before the rest of
        # the batch).
        self._writing = threading.RLock()

    def write_info(self, created: float, logger: str, message: str, fields: Fields) -> None:
        handler = self.handler
        if handler.level > logging.INFO:
            return
        with handler.lock:  # type: ignore[union-attr]
            self._held.append((created, logger, message, fields))
            if self.holding and len(self._held) < HELD_LINES_LIMIT:
                return
        # Not holding (the line goes out at once), or the batch is full.
        self.write_held()

    def write_held(self, *, holding: bool | None = None) -> None:
        """Write what is held; with `holding`, start or stop holding as well."""
        handler = self.handler
        with self._writing:
            with handler.lock:  # type: ignore[union-attr]
                if holding is not None:
                    self.holding = holding
                held, self._held = self._held, []
            pid = os.getpid()
            batch: list[str] = []
            batch_bytes = 0
            for line in held:
                text = self._render(line, pid)
                if text is None:
                    continue
                size = len(text) if text.isascii() else len(text.encode())
                if batch and batch_bytes + size > PIPE_BUF:
                    self._write_batch(batch)
                    batch, batch_bytes = [], 0
                batch.append(text)
                batch_bytes += size
            if batch:
                self._write_batch(batch)

    def _render(self, line: _HeldLine, pid: int) -> str | None:
        """The line's text, or None when it fails to render: the handler reports that, as it
        does a record that fails to format, and the other lines are written."""
        created, logger, message, fields = line
        try:
            if callable(fields):
                fields = fields()
            values = LineValues(created, "INFO", logger, pid, message, fields)
            return self.layout.render(values) + self.handler.terminator
        except Exception:
            self.handler.handleError(logging.makeLogRecord({"msg": message, "name": logger}))
            return None

    def _write_batch(self, texts: list[str]) -> None:
        with self.handler.lock:  # type: ignore[union-attr]
            self._write_locked("".join(texts))

    def _write_locked(self, text: str) -> None:
        handler = self.handler
        try:
            stream = handler.stream
            if stream is None and isinstance(handler, logging.FileHandler):
                # Closed, as FileHandler.emit finds it after a close: it opens it again.
                stream = handler.stream = handler._open()
            stream.write(text)
            stream.flush()
        except RecursionError:
            raise
        except Exception:
            handler.handleError(logging.makeLogRecord({"msg": text, "levelno": logging.INFO}))


class _HeldLinesFirst(logging.Filter):
    """On a routed handler while lines are held: writes them before the handler's next record."""

    def __init__(self, writer: LineWriter) -> None:
        super().__init__()
        self.writer = writer

    def filter(self, record: logging.LogRecord) -> bool:
        self.writer.write_held()
        return True


class LineWriter:
    """Writes one logger's lines, through its records until `route` finds plain streams."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._streams: tuple[_Stream, ...] | None = None
        self._writer: Periodically | None = None

    def route(self, handlers: Sequence[logging.Handler]) -> None:
        """Write straight to these handlers' streams when all of them allow it. Holding stops
        first, which takes this writer's own filter off the handlers it held lines for."""
        self.stop_holding()
        streams = []
        for handler in handlers:
            layout = handler.formatter
            plain = (
                type(handler) in _PLAIN_STREAM_HANDLERS
                and isinstance(layout, LineFormatter)
                and not handler.filters
                and getattr(handler, "stream", None) is not None
            )
            if not plain:
                self._streams = None
                return
            streams.append(_Stream(handler, layout))  # type: ignore[arg-type]
        self._streams = tuple(streams) or None

    def hold(self, seconds: float) -> None:
        """From now on, in this process, hold routed lines and write them every `seconds`.
        Call it in the process that writes them (a gunicorn worker): threads do not survive
        a fork. Nothing is held where lines are records, or when `seconds` is 0."""
        if seconds <= 0 or self._streams is None or self._writer is not None:
            return
        for stream in self._streams:
            stream.handler.addFilter(_HeldLinesFirst(self))
            stream.write_held(holding=True)
        self._writer = Periodically(
            seconds,
            self.write_held,
            "writing held log lines",
            thread_name="log-writer",
            last_act=True,
        )
        self._writer.start()

    def stop_holding(self) -> None:
        """Write what is held; later lines are written at once."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        writer.stop()
        for stream in self._streams or ():
            stream.write_held(holding=False)
            for found in list(stream.handler.filters):
                if isinstance(found, _HeldLinesFirst):
                    stream.handler.removeFilter(found)

    def write_held(self) -> None:
        for stream in self._streams or ():
            stream.write_held()

    def info(self, message: str, fields: Fields) -> None:
        logger = self._logger
        if not logger.isEnabledFor(logging.INFO):
            return
        streams = self._streams
        if streams is None:
            made = fields() if callable(fields) else fields
            logger.info(message, extra={FIELDS_ATTRIBUTE: made})
            return
        created = time.time()
        for stream in streams:
            stream.write_info(created, logger.name, message, fields)
