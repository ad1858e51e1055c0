"""``rms export``: stream a window of the message history out of PostgreSQL into Parquet.

Output directory::

    messages/part-00000.parquet ...  messages created in the window (every column but
                                     claim_token; payload and headers as JSON text)
    events/part-00000.parquet ...    every event of those messages (detail as JSON text)
    open/part-00000.parquet ...      messages created before --until, whatever --since, that
                                     are pending-send, sent or dead: the report's stuck list
    _export.json                     manifest: window, exported_at, row counts and files

Consistency: the three queries run in one read-only REPEATABLE READ transaction, so they see
one snapshot, and ``exported_at`` is that snapshot's database clock (``now()``); the report
uses it as "now" for what is stuck. Memory: server-side cursors hand over ``batch_size`` rows
at a time and each batch becomes one Parquet row group; a file is closed and the next begun
once it holds ``rows_per_file`` rows. Nothing is ever held for the whole window. Atomicity: the
files are written into a hidden sibling directory that is renamed into place at the end, so
a failed export leaves nothing half-written behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from history.dburl import asyncpg_dsn
from history.options import UsageError, Window
from history.states import open_states_sql
from history.tables import EVENT_COLUMNS, MESSAGE_COLUMNS, arrow_schema, select_list

MANIFEST = "_export.json"
FORMAT = "rms-history-export"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class ExportRequest:
    database_url: str
    out: Path
    window: Window = field(default_factory=Window)
    batch_size: int = 50_000
    rows_per_file: int = 1_000_000
    overwrite: bool = False


@dataclass
class ExportResult:
    out: Path
    exported_at: datetime
    rows: dict[str, int] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)


class PartWriter:
    """Parquet files ``part-NNNNN.parquet`` in one directory, one row group per batch."""

    def __init__(self, directory: Path, schema: Any, rows_per_file: int) -> None:
        self._directory = directory
        self._schema = schema
        self._rows_per_file = rows_per_file
        self._writer: Any = None
        self._rows_in_file = 0
        self.rows = 0
        self.files: list[str] = []
        directory.mkdir(parents=True)
        self._open_next()  # an empty table still gets a file that carries the schema

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        import pyarrow as pa

        if not rows:
            return
        if self._rows_in_file >= self._rows_per_file:
            self._writer.close()
            self._open_next()
        columns = list(zip(*rows, strict=True))
        arrays = [pa.array(values, type=f.type) for values, f in zip(columns, self._schema,
                                                                      strict=True)]
        self._writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=self._schema))
        self._rows_in_file += len(rows)
        self.rows += len(rows)

    def close(self) -> None:
        self._writer.close()

    def _open_next(self) -> None:
        import pyarrow.parquet as pq

        name = f"part-{len(self.files):05d}.parquet"
        self._writer = pq.ParquetWriter(self._directory / name, self._schema)
        self._rows_in_file = 0
        self.files.append(name)


def _window_filter(window: Window) -> tuple[str, list[datetime]]:
    clauses, args = ["TRUE"], []
    if window.since:
        args.append(window.since)
        clauses.append(f"m.created_at >= ${len(args)}")
    if window.until:
        args.append(window.until)
        clauses.append(f"m.created_at < ${len(args)}")
    return " AND ".join(clauses), args


def queries(window: Window) -> dict[str, tuple[str, list[datetime]]]:
    """The SQL of each exported table, with its arguments."""
    where, args = _window_filter(window)
    open_where, open_args = _window_filter(Window(until=window.until))
    messages = select_list(MESSAGE_COLUMNS, "m")
    return {
        "messages": (f"SELECT {messages} FROM messages AS m WHERE {where}", args),
        "events": (
            f"SELECT {select_list(EVENT_COLUMNS, 'e')} FROM message_events AS e "
            f"JOIN messages AS m ON m.message_id = e.message_id WHERE {where}",
            args,
        ),
        "open": (
            f"SELECT {messages} FROM messages AS m WHERE {open_where} "
            f"AND (m.dead OR m.state IN ({open_states_sql()}))",
            open_args,
        ),
    }


async def _copy_table(conn: Any, sql: str, args: list[datetime], writer: PartWriter,
                      batch_size: int) -> None:
    cursor = await conn.cursor(sql, *args)
    while rows := await cursor.fetch(batch_size):
        writer.write(rows)
    writer.close()


async def _export_into(request: ExportRequest, directory: Path) -> ExportResult:
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(request.database_url))
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            exported_at: datetime = await conn.fetchval("SELECT now()")
            result = ExportResult(out=request.out, exported_at=exported_at)
            for table, (sql, args) in queries(request.window).items():
                columns = EVENT_COLUMNS if table == "events" else MESSAGE_COLUMNS
                writer = PartWriter(directory / table, arrow_schema(columns),
                                    request.rows_per_file)
                await _copy_table(conn, sql, args, writer, request.batch_size)
                result.rows[table], result.files[table] = writer.rows, writer.files
    finally:
        await conn.close()
    return result


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _write_manifest(request: ExportRequest, result: ExportResult, directory: Path) -> None:
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "exported_at": iso(result.exported_at),
        "since": iso(request.window.since),
        "until": iso(request.window.until),
        "tables": {
            name: {"rows": result.rows[name], "files": result.files[name]}
            for name in result.rows
        },
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _check_destination(request: ExportRequest) -> None:
    out = request.out
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not request.overwrite:
        raise UsageError(f"--out {out} is not empty (pass --overwrite to replace it)")


def export(request: ExportRequest) -> ExportResult:
    """Run the export; raises ``UsageError`` for a bad destination, and asyncpg's or the OS's
    errors when the database or the disk fails (the partial directory is removed)."""
    _check_destination(request)
    out = request.out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    try:
        result = asyncio.run(_export_into(request, partial))
        _write_manifest(request, result, partial)
        if out.exists():
            shutil.rmtree(out)
        partial.rename(out)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return result
