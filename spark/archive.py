"""The retention archive on disk: day-partitioned ``rms export`` directories.

Layout::

    <archive>/day=YYYY-MM-DD/messages/part-<batch>.parquet   messages created that day (UTC)
    <archive>/day=YYYY-MM-DD/events/part-<batch>.parquet     every event of those messages
    <archive>/day=YYYY-MM-DD/events/part-<batch>-late.parquet events written after the batch
                                                             was read (rare; see spark.retention)
    <archive>/day=YYYY-MM-DD/_export.json                    the export manifest of the day
    <archive>/_retention-journal.json                        the batch in flight, if any

Each day directory is an ``rms export`` directory (columns from ``spark.tables``, manifest
from ``spark.export``), so ``rms report --input <archive>/day=...`` reads one day and
``rms report --archive <archive>`` reads the archive next to the live tables. A file is
written under a hidden name (Spark skips names starting with ``.`` or ``_``), flushed to disk
(``fsync``) and only then renamed to its final name, and the directory is flushed too, so a
crash never leaves a half-written Parquet file under a name a reader picks up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from spark.export import FORMAT, FORMAT_VERSION, MANIFEST, iso
from spark.tables import EVENT_COLUMNS, MESSAGE_COLUMNS, arrow_schema

JOURNAL = "_retention-journal.json"
TABLES = ("messages", "events")
DAY_PREFIX = "day="


def day_dir(archive: Path, day: date) -> Path:
    return archive / f"{DAY_PREFIX}{day.isoformat()}"


def archived_days(archive: Path) -> list[date]:
    """The days the archive holds, oldest first (unreadable names are ignored)."""
    days = []
    for path in archive.glob(f"{DAY_PREFIX}*"):
        try:
            days.append(date.fromisoformat(path.name.removeprefix(DAY_PREFIX)))
        except ValueError:
            continue
    return sorted(days)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` entirely or keeps what it held: hidden file, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = path.parent / f".{path.name}.tmp"
    with open(hidden, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    hidden.replace(path)
    fsync_dir(path.parent)


def write_parquet(path: Path, table: str, rows: Sequence[Sequence[Any]]) -> None:
    """``rows`` (in the column order of ``spark.tables``) as one durable Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(MESSAGE_COLUMNS if table == "messages" else EVENT_COLUMNS)
    columns: list[Sequence[Any]] = (list(zip(*rows, strict=True)) if rows
                                    else [[] for _ in schema])
    arrays = [pa.array(values, type=f.type) for values, f in zip(columns, schema, strict=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = path.parent / f".{path.name}.tmp"
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), hidden)
    with open(hidden, "rb") as handle:
        os.fsync(handle.fileno())
    hidden.replace(path)
    fsync_dir(path.parent)


def write_manifest(directory: Path, day: date, written_at: datetime) -> None:
    """The day's ``_export.json``, rebuilt from the files present (so rewriting it after a
    crash is always right); ``exported_at`` is the latest archive run that wrote the day."""
    import pyarrow.parquet as pq

    previous = read_manifest(directory).get("exported_at")
    stamp = iso(written_at)
    if isinstance(previous, str) and previous > (stamp or ""):
        stamp = previous
    tables: dict[str, Any] = {}
    for table in TABLES:
        files = sorted(p.name for p in (directory / table).glob("part-*.parquet"))
        rows = sum(pq.read_metadata(directory / table / name).num_rows for name in files)
        tables[table] = {"rows": rows, "files": files}
    start = datetime.combine(day, datetime.min.time(), tzinfo=written_at.tzinfo)
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "kind": "retention-archive",
        "exported_at": stamp,
        "since": iso(start),
        "until": iso(start + timedelta(days=1)),
        "tables": tables,
    }
    write_atomically(directory / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode())


def read_manifest(directory: Path) -> dict[str, Any]:
    try:
        loaded = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


@dataclass(frozen=True)
class Journal:
    """The batch between "archived" and "deleted": written before its first file, removed
    once its delete committed. ``files`` are relative to the archive."""

    batch: str
    message_ids: list[str]
    event_ids: list[int]
    files: list[str]
    late_files: list[str]

    def dump(self) -> bytes:
        return (json.dumps(self.__dict__) + "\n").encode()


def read_journal(archive: Path) -> Journal | None:
    path = archive / JOURNAL
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return Journal(data["batch"], list(data["message_ids"]), [int(i) for i in data["event_ids"]],
                   list(data["files"]), list(data["late_files"]))


def write_journal(archive: Path, journal: Journal) -> None:
    write_atomically(archive / JOURNAL, journal.dump())


def clear_journal(archive: Path) -> None:
    (archive / JOURNAL).unlink(missing_ok=True)
    fsync_dir(archive)


def remove_files(archive: Path, files: Iterable[str]) -> None:
    """The files and any hidden half-written copy of them (a crash inside a write)."""
    for name in files:
        path = archive / name
        path.unlink(missing_ok=True)
        (path.parent / f".{path.name}.tmp").unlink(missing_ok=True)
