"""Argument parsing shared by ``rms report``, ``rms export`` and ``rms retention``. Pure Python:
importing this module must not import Spark or touch the network."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from datetime import UTC, datetime


class UsageError(ValueError):
    """A bad argument: reported on stderr with exit code 2, never as a traceback."""


class ReportError(RuntimeError):
    """The work could not be done (database unreachable, input unreadable): exit code 1."""


@dataclass(frozen=True)
class Window:
    """``since <= created_at < until``; a missing bound is open."""

    since: datetime | None = None
    until: datetime | None = None


def parse_instant(text: str, name: str) -> datetime:
    """ISO 8601 (``2026-03-02T10:00:00Z``, ``...+02:00``, ``2026-03-02``); no zone means UTC."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"{name}: {text!r} is not an ISO 8601 time (e.g. 2026-03-02T10:00:00Z)"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def parse_window(since: str | None, until: str | None) -> Window:
    window = Window(
        since=parse_instant(since, "--since") if since else None,
        until=parse_instant(until, "--until") if until else None,
    )
    if window.since and window.until and window.since >= window.until:
        raise UsageError("--since must be earlier than --until")
    return window


def positive_int(text: str) -> int:
    """An ``argparse`` type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def non_negative_float(text: str) -> float:
    """An ``argparse`` type: seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def positive_float(text: str) -> float:
    """An ``argparse`` type: a finite number > 0."""
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def duty_cycle(text: str) -> float:
    """An ``argparse`` type: a share of the time, in (0, 1]."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at most 1")
    return value


def database_url(given: str | None) -> str:
    """``--database-url``, else ``RMS_DATABASE_URL``, checked by the one reading of it."""
    from rms.store.dburl import DatabaseUrlError, parse_database_url

    url = given or os.environ.get("RMS_DATABASE_URL")
    if not url:
        raise UsageError("set RMS_DATABASE_URL or pass --database-url")
    try:
        parse_database_url(url)
    except DatabaseUrlError as exc:
        raise UsageError(str(exc)) from None
    return url
