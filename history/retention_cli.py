"""``rms retention run [--older-than 30d | --before TIME] [--archive DIR] [--batch-size N]
[--batch-seconds S] [--duty-cycle F] [--pause-seconds S] [--dry-run]``: finished messages leave
the hot tables (see ``history.retention``), paced to yield to the request path
(``history.pacing``). Defaults come from ``RMS_RETENTION_*`` (``rms.config.RetentionSettings``).
Needs pyarrow when archiving, never Spark."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from history.archive import Modes
from history.options import (
    ReportError,
    UsageError,
    database_url,
    duty_cycle,
    non_negative_float,
    parse_instant,
    positive_float,
    positive_int,
)
from history.pacing import Pace
from history.retention import RetentionRequest, RetentionResult, parse_age, run_retention
from rms.config import RetentionSettings, config_problem
from rms.domain.counts import counted

PROG = "rms retention run"


def configure(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="action", required=True, metavar="run")
    run_parser = commands.add_parser(
        "run", help="archive (optionally) and delete finished messages past their age",
        description="Delete done/deleted messages (never dead or open ones) finished before "
                    "the cutoff, with their events, in short batches; with --archive, write "
                    "each batch to day-partitioned Parquet first.")
    age = run_parser.add_mutually_exclusive_group()
    age.add_argument("--older-than", help="age past done_at/deleted_at, from the database "
                     "clock: 30d, 12h, 90m, 45s (default RMS_RETENTION_OLDER_THAN, 30d)")
    age.add_argument("--before", help="an explicit cutoff instead (ISO 8601, UTC if no zone)")
    run_parser.add_argument("--archive", type=Path, help="archive directory (default "
                            "RMS_RETENTION_ARCHIVE_DIR; none: delete without archiving)")
    run_parser.add_argument("--batch-size", type=positive_int,
                            help="at most this many messages per transaction (default "
                            "RMS_RETENTION_BATCH_SIZE)")
    run_parser.add_argument("--batch-seconds", type=positive_float,
                            help="aim each batch at this many seconds (default "
                            "RMS_RETENTION_BATCH_SECONDS)")
    run_parser.add_argument("--duty-cycle", type=duty_cycle,
                            help="share of the time spent working, in (0, 1]; 1 with no pause "
                            "removes as fast as the database allows (default "
                            "RMS_RETENTION_DUTY_CYCLE)")
    run_parser.add_argument("--pause-seconds", type=non_negative_float,
                            help="a fixed pause added after every batch (default "
                            "RMS_RETENTION_PAUSE_SECONDS)")
    run_parser.add_argument("--dry-run", action="store_true",
                            help="count what would go; change nothing (a journaled batch "
                            "of a run that died is still finished)")
    run_parser.add_argument("--database-url", help="overrides RMS_DATABASE_URL")


def _request(args: argparse.Namespace) -> RetentionRequest:
    try:
        settings = RetentionSettings()
    except ValidationError as exc:
        raise UsageError(config_problem(exc)) from None
    archive = args.archive or (Path(settings.retention_archive_dir)
                               if settings.retention_archive_dir else None)
    before = parse_instant(args.before, "--before") if args.before else None
    return RetentionRequest(
        database_url=database_url(args.database_url),
        modes=Modes(int(settings.retention_archive_file_mode, 8)),
        older_than=None if before else parse_age(args.older_than or settings.retention_older_than),
        before=before,
        archive=archive,
        pace=_pace(args, settings),
        dry_run=args.dry_run,
    )


def _pace(args: argparse.Namespace, settings: RetentionSettings) -> Pace:
    return Pace(
        duty=args.duty_cycle or settings.retention_duty_cycle,
        batch_seconds=args.batch_seconds or settings.retention_batch_seconds,
        max_rows=args.batch_size or settings.retention_batch_size,
        pause_seconds=(settings.retention_pause_seconds if args.pause_seconds is None
                       else args.pause_seconds),
    )


def _summary(request: RetentionRequest, result: RetentionResult) -> str:
    cutoff = result.cutoff.isoformat().replace("+00:00", "Z")
    if request.dry_run:
        return (f"{PROG}: dry run: {_removed(result)} "
                f"finished before {cutoff} would be removed")
    archived = (f", archived to {request.archive} ({counted(len(result.days), 'day')})"
                if request.archive else "")
    resumed = (f"; {result.resumed} of them {'finishes' if result.resumed == 1 else 'finish'} "
               "an interrupted run") if result.resumed else ""
    if result.orphan_events:
        resumed += f"; {counted(result.orphan_events, 'event')} of messages already gone"
    if result.transactions:
        resumed += f"; {counted(result.transactions, 'finished transaction')}"
    return (f"{PROG}: {_removed(result)} finished before {cutoff} removed in "
            f"{counted(result.batches, 'batch', 'batches')}{archived}{resumed}")


def pace_line(pace: Pace, result: RetentionResult) -> str:
    """The speed while working and what the pace can therefore remove in a day."""
    return (f"{PROG}: pace: {result.busy_rate:,.0f} messages/s while working "
            f"({result.busy_seconds:.1f} s), resting {result.rest_seconds:.1f} s at duty cycle "
            f"{pace.duty:g}: about {pace.capacity_per_day(result.busy_rate):,.0f} "
            "messages a day")


def _removed(result: RetentionResult) -> str:
    return f"{counted(result.messages, 'message')} and {counted(result.events, 'event')}"


def run(args: argparse.Namespace) -> int:
    import asyncpg

    try:
        request = _request(args)
        result = run_retention(request)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        print(f"{PROG}: failed, the next run resumes safely: {exc}", file=sys.stderr)
        return 1
    print(_summary(request, result))
    if result.messages and not request.dry_run:
        print(pace_line(request.pace, result))
    return 0
