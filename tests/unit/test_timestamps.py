"""RFC 3339 read exactly and written in UTC with Z (rms_client.timestamps): properties over
generated instants and offsets, and the grammar's edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rms_client.timestamps import TimestampError, format_rfc3339, parse_rfc3339

_OFFSETS = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59)
_INSTANTS = st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31),
                         timezones=st.just(UTC))


def _written(moment: datetime, offset_minutes: int, upper: bool) -> str:
    local = moment.astimezone(timezone(timedelta(minutes=offset_minutes)))
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    text = (f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local.hour:02d}:"
            f"{local.minute:02d}:{local.second:02d}")
    text += f".{local.microsecond:06d}" if local.microsecond else ""
    text += f"{sign}{hours:02d}:{minutes:02d}"
    return text if upper else text.lower()


@given(_INSTANTS, _OFFSETS, st.booleans())
def test_any_offset_reads_back_as_the_same_instant(moment: datetime, offset: int,
                                                   upper: bool) -> None:
    assert parse_rfc3339(_written(moment, offset, upper)) == moment


@given(_INSTANTS)
def test_what_is_written_is_utc_with_z_and_reads_back(moment: datetime) -> None:
    text = format_rfc3339(moment.astimezone(timezone(timedelta(hours=5))))
    assert text.endswith("Z") and "+" not in text
    assert parse_rfc3339(text) == moment


@pytest.mark.parametrize(("text", "instant"), [
    ("2026-11-26t08:00:00z", datetime(2026, 11, 26, 8, tzinfo=UTC)),
    ("2026-11-26T08:00:00-00:00", datetime(2026, 11, 26, 8, tzinfo=UTC)),
    ("2016-12-31T23:59:60Z", datetime(2017, 1, 1, tzinfo=UTC)),
    ("2016-12-31T23:59:60.25Z", datetime(2017, 1, 1, 0, 0, 0, 250_000, tzinfo=UTC)),
    ("2017-01-01T00:59:60+01:00", datetime(2017, 1, 1, tzinfo=UTC)),
    ("2016-12-31T18:59:60-05:00", datetime(2017, 1, 1, tzinfo=UTC)),
    ("2026-11-26T08:00:00.0000001Z", datetime(2026, 11, 26, 8, 0, 0, 1, tzinfo=UTC)),
    ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
    ("0001-01-01T00:30:00-01:00", datetime(1, 1, 1, 1, 30, tzinfo=UTC)),
    ("2024-02-29T12:00:00Z", datetime(2024, 2, 29, 12, tzinfo=UTC)),
])
def test_rfc3339_forms_are_read(text: str, instant: datetime) -> None:
    assert parse_rfc3339(text) == instant


@pytest.mark.parametrize(("text", "reason"), [
    ("20261126T080000Z", "not an RFC 3339 timestamp"),
    ("2026-W48-4T08:00Z", "not an RFC 3339 timestamp"),
    ("2026-330T08:00:00Z", "not an RFC 3339 timestamp"),
    ("2026-11-26T08Z", "not an RFC 3339 timestamp"),
    ("2026-11-26T08:00Z", "not an RFC 3339 timestamp"),
    ("2026-11-26T08:00:00", "the offset is missing"),
    ("2026-11-26", "the time and the offset are missing"),
    ("2026-11-26 08:00:00Z", "not an RFC 3339 timestamp"),
    ("2026-11-26T08:00:00+0100", "not an RFC 3339 timestamp"),
    ("2026-11-26T08:00:00.Z", "not an RFC 3339 timestamp"),
    ("\uff12026-11-26T08:00:00Z", "not an RFC 3339 timestamp"),
    ("2026-11-26T08:00:00Z ", "not an RFC 3339 timestamp"),
    ("2026-02-29T00:00:00Z", "not a valid date"),
    ("2026-13-01T00:00:00Z", "not a valid date"),
    ("2026-11-26T24:00:00Z", "not a valid date"),
    ("2026-11-26T08:60:00Z", "not a valid date"),
    ("2026-11-26T08:00:61Z", "second 61"),
    ("2026-11-26T08:00:60Z", "leap second"),
    ("2016-12-31T23:59:60+01:00", "leap second"),
    ("2026-11-26T08:00:00+24:00", "offset"),
    ("2026-11-26T08:00:00+01:60", "offset"),
    ("0000-01-01T00:00:00Z", "not a valid date"),
    ("0001-01-01T00:30:00+01:00", "outside the years 0001-9999"),
    ("9999-12-31T23:30:00-01:00", "outside the years 0001-9999"),
    ("9999-12-31T23:59:60Z", "outside the years 0001-9999"),
])
def test_other_forms_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(TimestampError, match=reason):
        parse_rfc3339(text)


def test_a_naive_datetime_is_not_formatted() -> None:
    with pytest.raises(ValueError, match="naive"):
        format_rfc3339(datetime(2026, 1, 1))
