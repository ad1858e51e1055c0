"""RFC 3339 timestamps, read exactly as the RFC's grammar (section 5.6) writes them and written
in UTC with ``Z``.

Read: ``YYYY-MM-DDThh:mm:ss[.fraction](Z|+hh:mm|-hh:mm)``; ``T`` and ``Z`` may be lower case.
Refused: anything else ISO 8601 allows (basic format ``20261126T080000Z``, week dates
``2026-W48-4``, ordinal dates, hour-only or minute-only times, a missing offset, a space for
``T``) and dates or times out of range.

A leap second (``:60``) is accepted where one can occur, at 23:59:60 UTC (at the local time
that corresponds under an offset), and is read as the first instant after that minute, the
next day's 00:00:00 UTC (its fraction kept): a "not before" time is then never earlier than
the one given. Fractions finer than a microsecond are rounded up to the microsecond for the
same reason.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

_RFC3339 = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[Tt]"
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})(?:\.(?P<fraction>\d+))?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)
EXAMPLE = "2026-11-25T10:00:00Z"


class TimestampError(ValueError):
    """Not an RFC 3339 timestamp RMS can hold; the message says why."""


def parse_rfc3339(text: str) -> datetime:
    """The instant ``text`` names, in UTC; :class:`TimestampError` with a reason otherwise."""
    found = _RFC3339.fullmatch(text)
    if found is None:
        raise TimestampError(f"{text!r} is not an RFC 3339 timestamp{_what_is_missing(text)}: "
                             "write YYYY-MM-DDThh:mm:ss[.fraction] and an offset, Z or "
                             f"±hh:mm (e.g. {EXAMPLE})")
    part = {name: int(value) for name, value in found.groupdict().items()
            if name not in ("fraction", "offset") and value is not None}
    offset = _offset(text, found["offset"])
    second = part["second"]
    if second > 60:
        raise TimestampError(f"{text!r}: second {second} is out of range (00-60)")
    try:
        local = datetime(part["year"], part["month"], part["day"], part["hour"],
                         part["minute"], min(second, 59), tzinfo=offset)
        moment = (local + _fraction(found["fraction"])).astimezone(UTC)
        if second == 60:
            _check_leap_second(text, local)
            moment += timedelta(seconds=1)
    except TimestampError:
        raise
    except OverflowError:
        raise TimestampError(f"{text!r} is outside the years 0001-9999 in UTC") from None
    except ValueError as exc:  # month 13, February 30, hour 24, year 0000, ...
        raise TimestampError(f"{text!r} is not a valid date and time ({exc})") from None
    return moment


def format_rfc3339(moment: datetime) -> str:
    """``moment`` in UTC with ``Z`` (``0001-01-01T00:00:00Z``; microseconds when not zero)."""
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no instant to format")
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_NO_OFFSET = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?", re.ASCII)


def _what_is_missing(text: str) -> str:
    """The usual near misses, named."""
    if _DATE_ONLY.fullmatch(text):
        return " (a date alone: the time and the offset are missing)"
    if _NO_OFFSET.fullmatch(text):
        return " (the offset is missing)"
    return ""


def _offset(text: str, written: str) -> timezone:
    if written in ("Z", "z"):
        return UTC
    hours, minutes = int(written[1:3]), int(written[4:6])
    if hours > 23 or minutes > 59:
        raise TimestampError(f"{text!r}: offset {written} is out of range (at most ±23:59)")
    sign = -1 if written[0] == "-" else 1
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _fraction(digits: str | None) -> timedelta:
    if not digits:
        return timedelta()
    micros = -(-int(digits) * 1_000_000 // 10 ** len(digits))  # rounded up
    return timedelta(microseconds=micros)


def _check_leap_second(text: str, local: datetime) -> None:
    utc = local.astimezone(UTC)
    if (utc.hour, utc.minute) != (23, 59):
        raise TimestampError(f"{text!r}: a leap second (:60) occurs only at 23:59:60 UTC")
