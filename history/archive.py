"""The retention archive on disk: day-partitioned ``rms export`` directories.

Layout::

    <archive>/day=YYYY-MM-DD/messages/part-<batch>.parquet   messages created that day (UTC)
    <archive>/day=YYYY-MM-DD/events/part-<batch>.parquet     every event of those messages
    <archive>/day=YYYY-MM-DD/events/part-<batch>-late.parquet events written after the batch
                                                             was read (rare; see history.retention)
    <archive>/day=YYYY-MM-DD/_export.json                    the export manifest of the day
    <archive>/_retention-journal.json                        the batch in flight, if any

Each day directory is an ``rms export`` directory (columns from ``history.tables``, manifest
from ``history.export``), so ``rms report --input <archive>/day=...`` reads one day and
``rms report --archive <archive>`` reads the archive next to the live tables. A file is
written under a hidden name (Spark skips names starting with ``.`` or ``_``), flushed to disk
(``fsync``) and only then renamed to its final name, and the directory is flushed too, so a
crash never leaves a half-written Parquet file under a name a reader picks up.

The archive holds full payloads: its files are created owner-only (``0600``) and its folders
``0700``, unless ``RMS_RETENTION_ARCHIVE_FILE_MODE`` says otherwise (folders then get the
search bit wherever the file mode can read).

The journal is read as untrusted input: every file it names must be a part file of the
layout above, inside the archive, or the run stops with :class:`JournalError` (nothing is
deleted, on disk or in the database).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from history.export import FORMAT, FORMAT_VERSION, MANIFEST, iso
from history.options import ReportError
from history.tables import EVENT_COLUMNS, MESSAGE_COLUMNS, arrow_schema

JOURNAL = "_retention-journal.json"
TABLES = ("messages", "events")
DAY_PREFIX = "day="
# the only names a journal may list: a part file of one day's table
PART_NAME = re.compile(r"day=(\d{4}-\d{2}-\d{2})/(messages|events)/part-[0-9A-Za-z_-]+\.parquet")
PRIVATE_FILE_MODE = 0o600


@dataclass(frozen=True)
class Modes:
    """Permission bits of what the archive writes: ``file`` for files; folders get ``file``
    plus the search (execute) bit wherever ``file`` can read."""

    file: int = PRIVATE_FILE_MODE

    @property
    def folder(self) -> int:
        return self.file | ((self.file & 0o444) >> 2)


PRIVATE = Modes()


def make_dirs(path: Path, modes: Modes) -> None:
    """``path`` and its missing parents, each created with the folder mode (the umask does
    not widen or narrow it)."""
    missing = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
        os.chmod(folder, modes.folder)


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


def write_atomically(path: Path, data: bytes, modes: Modes = PRIVATE) -> None:
    """``path`` holds ``data`` entirely or keeps what it held: hidden file, fsync, rename."""
    make_dirs(path.parent, modes)
    hidden = path.parent / f".{path.name}.tmp"
    hidden.unlink(missing_ok=True)
    fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL, modes.file)
    os.fchmod(fd, modes.file)
    with open(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    hidden.replace(path)
    fsync_dir(path.parent)


def write_parquet(path: Path, table: str, rows: Sequence[Sequence[Any]],
                  modes: Modes = PRIVATE) -> None:
    """``rows`` (in the column order of ``history.tables``) as one durable Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(MESSAGE_COLUMNS if table == "messages" else EVENT_COLUMNS)
    columns: list[Sequence[Any]] = (list(zip(*rows, strict=True)) if rows
                                    else [[] for _ in schema])
    arrays = [pa.array(values, type=f.type) for values, f in zip(columns, schema, strict=True)]
    make_dirs(path.parent, modes)
    hidden = path.parent / f".{path.name}.tmp"
    hidden.unlink(missing_ok=True)
    os.close(os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL, modes.file))
    os.chmod(hidden, modes.file)  # created owner-only before a byte of payload is written
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), hidden)
    with open(hidden, "rb") as handle:
        os.fsync(handle.fileno())
    hidden.replace(path)
    fsync_dir(path.parent)


def write_manifest(directory: Path, day: date, written_at: datetime,
                   written: Mapping[str, int] | None = None, modes: Modes = PRIVATE) -> None:
    """The day's ``_export.json``, rebuilt from the files present (so rewriting it after a
    crash is always right); ``exported_at`` is the latest archive run that wrote the day.

    Incremental: each file's row count comes from ``written`` (``"<table>/<name>"``: rows of
    the files the caller just wrote), else from the previous manifest's ``parts``, and only a
    file neither knows (one a crashed run wrote) has its Parquet footer read."""
    import pyarrow.parquet as pq

    previous = read_manifest(directory)
    stamp = iso(written_at)
    if isinstance(previous.get("exported_at"), str) and previous["exported_at"] > (stamp or ""):
        stamp = previous["exported_at"]
    known = dict(written or {})
    tables: dict[str, Any] = {}
    for table in TABLES:
        before = _parts(previous, table)
        files = sorted(p.name for p in (directory / table).glob("part-*.parquet"))
        parts = {name: known.get(f"{table}/{name}", before.get(name)) for name in files}
        for name, rows in parts.items():
            if rows is None:
                parts[name] = pq.read_metadata(directory / table / name).num_rows
        counted = {name: int(rows or 0) for name, rows in parts.items()}
        tables[table] = {"rows": sum(counted.values()), "files": files, "parts": counted}
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
    write_atomically(directory / MANIFEST, (json.dumps(manifest, indent=2) + "\n").encode(),
                     modes)


def _parts(manifest: Mapping[str, Any], table: str) -> dict[str, int]:
    """A previous manifest's row count per file of ``table`` (none when it has no usable
    ``parts``)."""
    tables = manifest.get("tables")
    entry = tables.get(table) if isinstance(tables, dict) else None
    parts = entry.get("parts") if isinstance(entry, dict) else None
    if not isinstance(parts, dict):
        return {}
    return {name: rows for name, rows in parts.items()
            if isinstance(name, str) and isinstance(rows, int) and not isinstance(rows, bool)}


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


class JournalError(ReportError):
    """The journal is not one retention wrote: nothing is done with it."""


def read_journal(archive: Path) -> Journal | None:
    """The journaled batch, if any; :class:`JournalError` when the journal is unreadable or
    names anything but part files inside the archive."""
    path = archive / JOURNAL
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        journal = Journal(
            _text(data["batch"]), [_text(i) for i in data["message_ids"]],
            [_number(i) for i in data["event_ids"]],
            [_part(archive, n) for n in data["files"]],
            [_part(archive, n) for n in data["late_files"]])
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        raise JournalError(
            f"the journal {path} is not one retention wrote ({_reason(exc)}); nothing was "
            f"changed. Move it out of the archive and run again: the batch it names is "
            f"then archived again from the database (remove that batch's part files, named "
            f"part-<batch>*.parquet, if a day holds them)") from None
    return journal


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing {exc}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _number(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not an event id")
    return value


def _part(archive: Path, name: Any) -> str:
    """``name`` when it is ``day=YYYY-MM-DD/{messages,events}/part-*.parquet`` and lies
    inside the archive (no link leads out of it)."""
    match = PART_NAME.fullmatch(_text(name))
    if match is None:
        raise ValueError(f"{name!r} is not an archive part file")
    date.fromisoformat(match[1])
    root = archive.resolve()
    if not (archive / name).resolve().is_relative_to(root):
        raise ValueError(f"{name!r} leads outside the archive")
    return str(name)


def write_journal(archive: Path, journal: Journal, modes: Modes = PRIVATE) -> None:
    write_atomically(archive / JOURNAL, journal.dump(), modes)


def clear_journal(archive: Path) -> None:
    (archive / JOURNAL).unlink(missing_ok=True)
    fsync_dir(archive)


def remove_files(archive: Path, files: Iterable[str]) -> None:
    """The files and any hidden half-written copy of them (a crash inside a write)."""
    for name in files:
        path = archive / name
        path.unlink(missing_ok=True)
        (path.parent / f".{path.name}.tmp").unlink(missing_ok=True)
