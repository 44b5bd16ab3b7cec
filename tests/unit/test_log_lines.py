"""Lines written straight to plain stream handlers: the same line the handler would write for a
record, the handler's level and lock respected, and any other handler given records."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.server.log_format import FIELDS_ATTRIBUTE, JsonFormatter, LineValues, TextFormatter
from webhook.server.log_lines import LineWriter

FIELDS = {"uid": "u-1", "dryRun": False, "policy": "", "denial": 'Pod "p": no', "durationMs": 0.25}
field_values = st.one_of(
    st.text(max_size=8), st.booleans(), st.none(), st.integers(), st.floats(allow_nan=False)
)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    made = logging.getLogger("test.log_lines")
    made.propagate = False
    made.setLevel(logging.INFO)
    yield made
    made.handlers = []


def stream_handler(
    layout: logging.Formatter, stream: io.StringIO | None = None
) -> tuple[logging.StreamHandler[io.StringIO], io.StringIO]:
    stream = stream if stream is not None else io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(layout)
    return handler, stream


@given(
    fields=st.dictionaries(st.text(min_size=1, max_size=6), field_values, max_size=5),
    created=st.floats(min_value=0, max_value=4e9),
)
@pytest.mark.parametrize("layout", [JsonFormatter, TextFormatter])
def test_a_rendered_line_is_the_line_a_record_formats_to(
    layout: type[JsonFormatter | TextFormatter], fields: dict, created: float
) -> None:
    record = logging.LogRecord(
        "webhook.admission", logging.INFO, __file__, 1, "admission", (), None
    )
    record.created = created
    setattr(record, FIELDS_ATTRIBUTE, fields)
    formatter = layout()
    values = LineValues(created, "INFO", "webhook.admission", record.process, "admission", fields)
    rendered = formatter.render(values)
    assert rendered == formatter.format(record)


@pytest.mark.parametrize("layout", [JsonFormatter(), TextFormatter()], ids=["json", "text"])
def test_a_routed_line_goes_straight_to_the_stream(
    logger: logging.Logger, layout: logging.Formatter, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, stream = stream_handler(layout)
    logger.handlers = [handler]
    writer = LineWriter(logger)
    writer.route(logger.handlers)

    def no_record(record: logging.LogRecord) -> bool:
        raise AssertionError("a record was made for a line routed straight to the stream")

    monkeypatch.setattr(handler, "handle", no_record)
    writer.info("admission", FIELDS)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    if isinstance(layout, JsonFormatter):
        line = json.loads(lines[0])
        assert line["pid"] == os.getpid() and line["logger"] == logger.name
        assert {key: line[key] for key in FIELDS} == FIELDS
    else:
        assert f"] [{os.getpid()}] [INFO] admission uid=u-1 dryRun=false" in lines[0]


def test_a_handler_above_info_writes_nothing(logger: logging.Logger) -> None:
    handler, stream = stream_handler(TextFormatter())
    handler.setLevel(logging.WARNING)
    logger.handlers = [handler]
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    writer.info("admission", FIELDS)
    assert stream.getvalue() == ""


def test_a_logger_above_info_writes_nothing(logger: logging.Logger) -> None:
    handler, stream = stream_handler(TextFormatter())
    logger.handlers = [handler]
    logger.setLevel(logging.WARNING)
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    writer.info("admission", FIELDS)
    assert stream.getvalue() == ""


class Remembering(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_with_any_other_handler_every_line_is_a_record(logger: logging.Logger) -> None:
    plain, stream = stream_handler(JsonFormatter())
    other = Remembering()
    logger.handlers = [plain, other]
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    writer.info("admission", FIELDS)
    assert [getattr(record, FIELDS_ATTRIBUTE) for record in other.records] == [FIELDS]
    assert json.loads(stream.getvalue())["uid"] == "u-1"


def test_a_handler_with_a_filter_sees_records(logger: logging.Logger) -> None:
    handler, stream = stream_handler(TextFormatter())
    handler.addFilter(lambda record: getattr(record, FIELDS_ATTRIBUTE)["uid"] != "u-1")
    logger.handlers = [handler]
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    writer.info("admission", FIELDS)
    writer.info("admission", {**FIELDS, "uid": "u-2"})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and "uid=u-2" in lines[0]


def test_a_closed_log_file_is_opened_again(logger: logging.Logger, tmp_path: Path) -> None:
    handler = logging.FileHandler(tmp_path / "webhook.log")
    handler.setFormatter(JsonFormatter())
    logger.handlers = [handler]
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    writer.info("admission", FIELDS)
    handler.close()
    writer.info("admission", {**FIELDS, "uid": "u-2"})
    handler.close()
    lines = (tmp_path / "webhook.log").read_text().splitlines()
    assert [json.loads(line)["uid"] for line in lines] == ["u-1", "u-2"]


class BrokenStream(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError("disk full")


def test_a_stream_that_fails_is_reported_by_the_handler_not_raised(
    logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler = logging.StreamHandler(BrokenStream())
    handler.setFormatter(TextFormatter())
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(handler, "handleError", reported.append)
    logger.handlers = [handler]
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    writer.info("admission", FIELDS)
    assert len(reported) == 1 and "uid=u-1" in reported[0].getMessage()


def test_unrouted_lines_are_records(logger: logging.Logger) -> None:
    other = Remembering()
    logger.handlers = [other]
    LineWriter(logger).info("admission", FIELDS)
    assert [record.getMessage() for record in other.records] == ["admission"]


class RecordingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def routed_text_writer(logger: logging.Logger) -> tuple[LineWriter, RecordingStream]:
    """A writer routed to the logger's one stream handler, in the text layout."""
    stream = RecordingStream()
    handler, _ = stream_handler(TextFormatter(), stream)
    logger.handlers = [handler]
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    return writer, stream


def test_each_routed_line_is_one_write_of_the_whole_line(logger: logging.Logger) -> None:
    writer, stream = routed_text_writer(logger)
    long_denial = "x" * 10_000  # longer than any pipe keeps whole in one write: still one
    writer.info("admission", FIELDS)
    writer.info("admission", {**FIELDS, "uid": "u-2", "denial": long_denial})
    assert len(stream.writes) == 2
    assert all(write.endswith("\n") and write.count("\n") == 1 for write in stream.writes)
    assert "uid=u-1" in stream.writes[0] and "uid=u-2" in stream.writes[1]


class Unprintable:
    def __str__(self) -> str:
        raise KeyError("uid")


def test_a_line_that_fails_to_render_is_reported_and_the_next_written(
    logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    writer, stream = routed_text_writer(logger)
    writer.info("admission", {**FIELDS, "uid": Unprintable()})
    writer.info("admission", {**FIELDS, "uid": "u-3"})
    assert [line.split("uid=")[1].split()[0] for line in stream.getvalue().splitlines()] == ["u-3"]
    assert "KeyError: 'uid'" in capsys.readouterr().err
