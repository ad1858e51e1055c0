"""``rms export --since ... --until ... --out DIR``: the history of a window as Parquet (see
``history.export`` for the layout). Needs pyarrow, not Spark."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from history.export import ExportRequest, ExportResult, export
from history.options import (
    ReportError,
    UsageError,
    database_url,
    parse_window,
    positive_int,
)
from rms.domain.counts import counted

PROG = "rms export"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path, help="output directory (created)")
    parser.add_argument("--since", help="first creation time included (ISO 8601, UTC if no zone)")
    parser.add_argument("--until", help="creation time excluded from here on (ISO 8601)")
    parser.add_argument("--database-url", help="overrides RMS_DATABASE_URL")
    parser.add_argument("--batch-size", type=positive_int, default=50_000,
                        help="rows fetched per round trip and per Parquet row group")
    parser.add_argument("--rows-per-file", type=positive_int, default=1_000_000,
                        help="start a new Parquet file after this many rows")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace --out when it is not empty")


def run(args: argparse.Namespace) -> int:
    try:
        request = ExportRequest(
            database_url=database_url(args.database_url),
            out=args.out,
            window=parse_window(args.since, args.until),
            batch_size=args.batch_size,
            rows_per_file=args.rows_per_file,
            overwrite=args.overwrite,
        )
        result = _export(request)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    rows = ", ".join(f"{counted(count, 'row')} of {name}" for name, count in result.rows.items())
    print(f"{PROG}: {rows} written to {result.out}")
    return 0


def _export(request: ExportRequest) -> ExportResult:
    import asyncpg

    try:
        return export(request)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise ReportError(f"export failed: {exc}") from exc
