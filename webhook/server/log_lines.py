"""Lines the service logs at every request, written straight to the streams behind its handlers.

An admission writes a line, so under load the logging module's work per line (a LogRecord,
the dispatch through logger and handler, the formatter reading the record back) costs as much
as judging a pod. Where every handler is a plain stream handler (gunicorn's stderr or its log
file) with one of the service's layouts and no filter, the line is rendered from its values and
written under the handler's own lock, as the handler itself would write it: one write of one
line, which a pipe shared by the workers keeps whole up to PIPE_BUF (4 KiB on Linux; a longer
line, such as a long denial, may interleave with another worker's). With any other handler
(syslog, one from a logging config) each line is a LogRecord, as usual.

Lines are written at once. Holding them to write a batch at a time was tried and measured: it
bought nothing, neither admissions/s at saturation nor p99 at 1,000/s (bench/, Edge section).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.server.log_format import FIELDS_ATTRIBUTE, LineFormatter, LineValues

_PLAIN_STREAM_HANDLERS = (logging.StreamHandler, logging.FileHandler)


class _Stream:
    def __init__(self, handler: logging.StreamHandler[Any], layout: LineFormatter):
        self.handler = handler
        self.layout = layout

    def write_info(
        self, created: float, logger: str, message: str, fields: Mapping[str, Any]
    ) -> None:
        handler = self.handler
        if handler.level > logging.INFO:
            return
        try:
            values = LineValues(created, "INFO", logger, os.getpid(), message, fields)
            text = self.layout.render(values) + handler.terminator
        except Exception:
            # Reported as the handler reports a record that fails to format.
            handler.handleError(logging.makeLogRecord({"msg": message, "name": logger}))
            return
        with handler.lock:  # type: ignore[union-attr]
            self._write_locked(text)

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


class LineWriter:
    """Writes one logger's lines, through its records until `route` finds plain streams."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._streams: tuple[_Stream, ...] | None = None

    def route(self, handlers: Sequence[logging.Handler]) -> None:
        """Write straight to these handlers' streams when all of them allow it."""
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

    def info(self, message: str, fields: Mapping[str, Any]) -> None:
        logger = self._logger
        if not logger.isEnabledFor(logging.INFO):
            return
        streams = self._streams
        if streams is None:
            logger.info(message, extra={FIELDS_ATTRIBUTE: fields})
            return
        created = time.time()
        for stream in streams:
            stream.write_info(created, logger.name, message, fields)
