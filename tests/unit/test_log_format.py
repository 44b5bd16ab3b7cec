"""The two log layouts: a JSON object per line, and gunicorn's text with key=value fields."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.server.log_format import JsonFormatter, TextFormatter, rfc3339
from webhook.server.settings import Settings, SettingsError

FIELDS = {"uid": "u-1", "dryRun": False, "policy": "", "denial": 'Pod "p": no', "durationMs": 0.25}


def record(message: str = "admission", **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("webhook.admission", logging.INFO, __file__, 1, message, (), None)
    made.created = 1_777_887_000.125
    made.__dict__.update(extra)
    return made


def test_a_json_line_carries_the_fields_beside_the_message() -> None:
    line = JsonFormatter().format(record(fields=FIELDS))
    assert json.loads(line) == {
        "time": "2026-05-04T09:30:00.125Z",
        "level": "info",
        "logger": "webhook.admission",
        "pid": record().process,
        "message": "admission",
        **FIELDS,
    }


def test_a_traceback_stays_on_its_json_line() -> None:
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        failed = record("unexpected fault", exc_info=sys.exc_info())
    line = JsonFormatter().format(failed)
    assert "\n" not in line
    assert "RuntimeError: a bug" in json.loads(line)["exception"]


def test_a_json_line_survives_a_field_it_cannot_encode() -> None:
    line = JsonFormatter().format(record(fields={"where": object}))
    assert json.loads(line)["where"] == str(object)


@pytest.mark.parametrize(
    ("fields", "suffix"),
    [
        ({}, "admission"),
        (
            FIELDS,
            'admission uid=u-1 dryRun=false policy="" denial="Pod \\"p\\": no" durationMs=0.25',
        ),
    ],
    ids=["no fields", "quoted where needed"],
)
def test_a_text_line_is_gunicorns_layout_then_key_value(fields: dict, suffix: str) -> None:
    line = TextFormatter().format(record(fields=fields))
    assert line.startswith("[20") and f"] [{record().process}] [INFO] " in line
    assert line.endswith(suffix)


def test_times_are_rfc3339_in_utc_to_the_millisecond() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert rfc3339(1.9999996) == "1970-01-01T00:00:02.000Z"


@given(st.lists(st.floats(min_value=0, max_value=4e9), min_size=1, max_size=4))
def test_times_read_as_datetime_reads_them(timestamps: list[float]) -> None:
    # The date and time of the last second are kept between lines: in turn, each must read
    # as its own.
    for timestamp in (*timestamps, *(t + 0.5 for t in timestamps)):
        moment = datetime.fromtimestamp(timestamp, UTC)
        expected = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert rfc3339(timestamp) == expected


@pytest.mark.parametrize(("value", "chosen"), [(None, "json"), ("json", "json"), ("text", "text")])
def test_log_format_setting(value: str | None, chosen: str) -> None:
    environ = {} if value is None else {"LOG_FORMAT": value}
    assert Settings.from_environ(environ).log_format == chosen


def test_log_levels_are_gunicorns_and_any_other_is_refused() -> None:
    assert Settings.from_environ({"LOG_LEVEL": "WARNING"}).log_level == "warning"
    with pytest.raises(SettingsError, match="LOG_LEVEL='verbose' is not one of debug, info"):
        Settings.from_environ({"LOG_LEVEL": "verbose"})


def test_an_unknown_log_format_is_refused() -> None:
    with pytest.raises(SettingsError, match="LOG_FORMAT='yaml' is not one of json, text"):
        Settings.from_environ({"LOG_FORMAT": "yaml"})


@given(
    st.one_of(
        st.text(max_size=12),
        st.booleans(),
        st.none(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
    )
)
def test_a_text_value_reads_back_as_one_token(value: object) -> None:
    line = TextFormatter().format(record(fields={"key": value, "next": 1}))
    written = line.split(" key=", 1)[1].rsplit(" next=1", 1)[0]
    if isinstance(value, str) and written.startswith('"'):
        assert json.loads(written) == value
    elif isinstance(value, str):
        assert written == value and value and not any(c.isspace() or c in '"=' for c in value)
    else:
        assert json.loads(written) == value
