"""Lines written straight to plain stream handlers: the same line the handler would write for a
record, the handler's level and lock respected, and any other handler given records."""

from __future__ import annotations

import io
import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.waiting import eventually
from webhook.server.log_format import FIELDS_ATTRIBUTE, JsonFormatter, LineValues, TextFormatter
from webhook.server.log_lines import HELD_LINES_LIMIT, PIPE_BUF, LineWriter

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


def test_a_record_carries_the_fields_a_function_makes(logger: logging.Logger) -> None:
    other = Remembering()
    logger.handlers = [other]
    LineWriter(logger).info("admission", lambda: FIELDS)
    (record,) = other.records
    assert getattr(record, FIELDS_ATTRIBUTE) == FIELDS


# --- held lines --------------------------------------------------------------------------


def routed_text_writer(
    logger: logging.Logger, stream: io.StringIO | None = None
) -> tuple[LineWriter, logging.StreamHandler[io.StringIO], io.StringIO]:
    """A writer routed to the logger's one stream handler, in the text layout."""
    handler, stream = stream_handler(TextFormatter(), stream)
    logger.handlers = [handler]
    writer = LineWriter(logger)
    writer.route(logger.handlers)
    return writer, handler, stream


class RecordingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


@pytest.fixture
def holding(logger: logging.Logger) -> Iterator[tuple[LineWriter, RecordingStream]]:
    """A writer holding its lines for a minute: only what the test does writes them. Its
    stream records each write."""
    stream = RecordingStream()
    writer, _, _ = routed_text_writer(logger, stream)
    writer.hold(60)
    yield writer, stream
    writer.stop_holding()


def uids(stream: io.StringIO) -> list[str]:
    return uids_in(stream.getvalue())


def uids_in(text: str) -> list[str]:
    return [line.split("uid=")[1].split()[0] for line in text.splitlines()]


def test_held_lines_are_written_together_when_asked(
    holding: tuple[LineWriter, io.StringIO],
) -> None:
    writer, stream = holding
    writer.info("admission", FIELDS)
    writer.info("admission", {**FIELDS, "uid": "u-2"})
    assert stream.getvalue() == ""
    writer.write_held()
    assert uids(stream) == ["u-1", "u-2"]


def test_held_lines_are_written_before_a_record_of_the_same_handler(
    logger: logging.Logger, holding: tuple[LineWriter, io.StringIO]
) -> None:
    writer, stream = holding
    writer.info("admission", FIELDS)
    logger.warning("the policies do not load")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert "uid=u-1" in lines[0] and "[WARNING] the policies do not load" in lines[1]


def test_held_lines_are_written_once_the_limit_of_them_wait(
    holding: tuple[LineWriter, io.StringIO],
) -> None:
    writer, stream = holding
    for index in range(HELD_LINES_LIMIT - 1):
        writer.info("admission", {**FIELDS, "uid": f"u-{index}"})
    assert stream.getvalue() == ""
    writer.info("admission", {**FIELDS, "uid": f"u-{HELD_LINES_LIMIT - 1}"})
    assert uids(stream) == [f"u-{index}" for index in range(HELD_LINES_LIMIT)]


def test_a_held_lines_fields_are_made_when_it_is_written(
    holding: tuple[LineWriter, io.StringIO],
) -> None:
    writer, stream = holding
    made: list[str] = []

    def fields() -> dict[str, object]:
        made.append("u-1")
        return FIELDS

    writer.info("admission", fields)
    assert made == []
    writer.write_held()
    assert made == ["u-1"] and uids(stream) == ["u-1"]


def test_a_line_that_fails_to_render_is_reported_and_the_others_written(
    holding: tuple[LineWriter, io.StringIO], capsys: pytest.CaptureFixture[str]
) -> None:
    writer, stream = holding

    def broken() -> dict[str, object]:
        raise KeyError("uid")

    writer.info("admission", FIELDS)
    writer.info("admission", broken)
    writer.info("admission", {**FIELDS, "uid": "u-3"})
    writer.write_held()
    assert uids(stream) == ["u-1", "u-3"]
    assert "KeyError: 'uid'" in capsys.readouterr().err


def test_when_holding_stops_held_lines_and_later_ones_are_written(
    holding: tuple[LineWriter, io.StringIO],
) -> None:
    writer, stream = holding
    writer.info("admission", FIELDS)
    writer.stop_holding()
    assert uids(stream) == ["u-1"]
    writer.info("admission", {**FIELDS, "uid": "u-2"})
    assert uids(stream) == ["u-1", "u-2"]


def test_held_lines_are_written_within_the_interval(logger: logging.Logger) -> None:
    writer, _, stream = routed_text_writer(logger)
    writer.hold(0.5)
    try:
        writer.info("admission", FIELDS)
        assert stream.getvalue() == ""
        eventually(stream.getvalue)
        assert uids(stream) == ["u-1"]
    finally:
        writer.stop_holding()


def test_holding_for_no_time_holds_nothing(logger: logging.Logger) -> None:
    writer, handler, stream = routed_text_writer(logger)
    writer.hold(0)
    writer.info("admission", FIELDS)
    assert uids(stream) == ["u-1"]
    assert handler.filters == []


def test_held_lines_go_out_in_whole_lines_each_write_small_enough_for_a_pipe(
    holding: tuple[LineWriter, RecordingStream],
) -> None:
    writer, stream = holding
    made = 200
    for index in range(made):
        writer.info("admission", {**FIELDS, "uid": f"u-{index}", "name": "träger-ß"})
    writer.stop_holding()
    longest = max(len(line.encode()) for line in stream.getvalue().splitlines(keepends=True))
    lines_per_write = PIPE_BUF // longest
    # Each batch of held lines goes out in as few writes as fit it.
    batches = [HELD_LINES_LIMIT] * (made // HELD_LINES_LIMIT) + [made % HELD_LINES_LIMIT]
    fewest = sum(math.ceil(batch / lines_per_write) for batch in batches)
    assert 1 < len(stream.writes) <= fewest
    for text in stream.writes:
        assert text.endswith("\n") and len(text.encode()) <= PIPE_BUF
    assert uids(stream) == [f"u-{index}" for index in range(made)]


def test_a_held_line_longer_than_a_pipe_write_goes_out_alone_and_whole(
    holding: tuple[LineWriter, RecordingStream],
) -> None:
    writer, stream = holding
    writer.info("admission", FIELDS)
    writer.info("admission", {**FIELDS, "uid": "u-long", "denial": "no " * PIPE_BUF})
    writer.info("admission", {**FIELDS, "uid": "u-3"})
    writer.stop_holding()
    assert [uids_in(text) for text in stream.writes] == [["u-1"], ["u-long"], ["u-3"]]
