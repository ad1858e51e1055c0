"""``rms retention run``: finished messages leave the hot tables, archived first when asked.

What goes: messages in state ``done`` or ``deleted`` that are not dead, finished
(``done_at`` / ``deleted_at``) before the cutoff, with every event of theirs. Open messages
(``pending-send``, ``sent``) and dead ones are never touched. The cutoff is fixed once per
run, from the database clock (``now() - older_than``) or given.

How (batched deletes, see docs/operations/retention.md for the measurement against partitions): the
candidates are read in ``(created_at, message_id)`` order through the ``messages_created``
index, a batch at a time, continuing after the last key of the previous batch; each batch is
deleted in one short transaction that locks only its own rows, which nothing on the request
path writes any more (finished messages are final), so prepares, confirms and acks never wait
on it. Between batches the run rests, and it sizes the batches, as :mod:`history.pacing`
says, so that it takes only its share of the database.

With an archive, each batch is, in this order:

1. read in one snapshot (messages and their events);
2. journaled: ``_retention-journal.json`` names the batch's message ids, event ids and files;
3. written: one Parquet file per day and table, each fsynced before its final rename, then
   the day manifests (``history.archive``);
4. deleted: exactly the journaled ids, in one transaction. Events that appeared after step 1
   (a late publish outcome) are deleted with the batch and written to the batch's ``-late``
   file before the commit; the last delete names every event id it removes (the journaled
   ones and the late ones just written), so an event committed while the transaction runs is
   never deleted unarchived: it stays, and a later run archives it as an orphan;
5. un-journaled.

A run that dies anywhere resumes on the next run, which first finishes the journaled batch:
all its files present means it was archived, so its ids are deleted (a no-op if step 4 had
committed); a file missing means the crash came before any delete, so the files present are
removed and the rows are archived again later. No row is archived twice, none is lost. Only
one run works at a time (a PostgreSQL advisory lock); a second one exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from history.archive import (
    PRIVATE,
    Journal,
    Modes,
    clear_journal,
    day_dir,
    make_dirs,
    read_journal,
    remove_files,
    write_journal,
    write_manifest,
    write_parquet,
)
from history.dburl import asyncpg_dsn
from history.options import ReportError, UsageError
from history.pacing import Pace, Pacer
from history.tables import EVENT_COLUMNS, MESSAGE_COLUMNS, select_list
from rms.store.retention import (
    FINISHED,
    delete_events,
    delete_finished_messages,
    delete_transactions,
    take_late_events,
)

# pg_try_advisory_lock key: "rms-retention" (one run at a time per database)
LOCK_KEY = 0x726D735F72657431

# a message finished before the cutoff was created before it: the index bounds the scan
CANDIDATES = f"""
SELECT {select_list(MESSAGE_COLUMNS, "m")}
FROM messages AS m
WHERE m.created_at < $1 AND (m.created_at, m.message_id) > ($2, $3) AND {FINISHED}
ORDER BY m.created_at, m.message_id
LIMIT $4
"""
_EVENTS = f"""
SELECT {select_list(EVENT_COLUMNS, "e")} FROM message_events AS e
WHERE e.message_id = ANY($1::text[]) ORDER BY e.id
"""
_COUNT = f"""
SELECT count(*) AS messages,
       (SELECT count(*) FROM message_events AS e
        WHERE e.message_id IN (SELECT m.message_id FROM messages AS m
                               WHERE m.created_at < $1 AND {FINISHED})) AS events
FROM messages AS m WHERE m.created_at < $1 AND {FINISHED}
"""
_EVENT_LIST = select_list(EVENT_COLUMNS, "e")
# events older than the cutoff whose message is gone (a publish outcome recorded after its
# message was removed)
_ORPHANS = f"""
SELECT {select_list(EVENT_COLUMNS, "e")} FROM message_events AS e
WHERE e.at < $1 AND e.id > $2
  AND NOT EXISTS (SELECT 1 FROM messages AS m WHERE m.message_id = e.message_id)
ORDER BY e.id
LIMIT $3
"""

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_START = (datetime(1900, 1, 1, tzinfo=UTC), "")  # before every key


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s`` (a positive amount)."""
    match = _AGE.match(text)
    if not match or float(match[1]) <= 0:
        raise UsageError(f"{text!r} is not an age like 30d, 12h, 90m or 45s")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2]])


@dataclass(frozen=True)
class RetentionRequest:
    database_url: str
    older_than: timedelta | None = None  # from the database clock; or:
    before: datetime | None = None  # an explicit cutoff
    archive: Path | None = None
    modes: Modes = PRIVATE  # permission bits of the archive's files and folders
    pace: Pace = field(default_factory=Pace)  # batch size, duty cycle, pause: history.pacing
    dry_run: bool = False


@dataclass
class RetentionResult:
    cutoff: datetime
    messages: int = 0
    archived: int = 0  # of them, written to the archive first
    events: int = 0
    batches: int = 0
    late_events: int = 0
    orphan_events: int = 0  # events past the cutoff whose message was already gone
    transactions: int = 0  # finished transactions whose messages were all removed
    resumed: int = 0  # messages of a journaled batch finished by this run
    days: list[str] = field(default_factory=list)  # archive days written
    busy_seconds: float = 0.0  # spent in batches (reading, archiving, deleting)
    rest_seconds: float = 0.0  # spent resting between them (history.pacing)

    @property
    def busy_rate(self) -> float:
        """Messages removed per second of work (the database's speed at this batch size)."""
        return self.messages / self.busy_seconds if self.busy_seconds > 0 else 0.0


@dataclass(frozen=True)
class Batch:
    name: str
    messages: list[Any]  # asyncpg Records, columns of MESSAGE_COLUMNS
    events: list[Any]  # columns of EVENT_COLUMNS

    @property
    def message_ids(self) -> list[str]:
        return [row["message_id"] for row in self.messages]

    @property
    def last_key(self) -> tuple[Any, str]:
        row = self.messages[-1]
        return row["created_at"], row["message_id"]


def _day(row: Any) -> date:
    stamp: datetime = row["created_at"]
    return stamp.date()


def _batch_files(batch: Batch) -> tuple[dict[str, list[Any]], list[str], list[str]]:
    """Rows per archive file, and the relative names of the files and of the late files."""
    day_of = {row["message_id"]: _day(row) for row in batch.messages}
    files: dict[str, list[Any]] = defaultdict(list)
    for row in batch.messages:
        files[f"{day_dir(Path(), day_of[row['message_id']])}/messages/part-{batch.name}.parquet"
              ].append(row)
    for row in batch.events:
        files[f"{day_dir(Path(), day_of[row['message_id']])}/events/part-{batch.name}.parquet"
              ].append(row)
    for day in sorted(set(day_of.values())):  # every day gets its events file, maybe empty
        files.setdefault(f"{day_dir(Path(), day)}/events/part-{batch.name}.parquet", [])
    late = [f"{day_dir(Path(), day)}/events/part-{batch.name}-late.parquet"
            for day in sorted(set(day_of.values()))]
    return files, sorted(files), late


class Retention:
    """One run on one connection (which holds the advisory lock)."""

    def __init__(self, conn: Any, request: RetentionRequest, cutoff: datetime,
                 clock: datetime) -> None:
        self._conn = conn
        self._request = request
        self._archive = request.archive
        self.result = RetentionResult(cutoff=cutoff)
        self._clock = clock
        self._stamp = clock.strftime("%Y%m%dT%H%M%S%fZ")
        self._modes = request.modes
        self._written: dict[str, int] = {}  # rows of each file this run wrote
        self._pacer = Pacer(request.pace)

    async def run(self) -> RetentionResult:
        if self._archive is not None:
            await self.resume()
        if self._request.dry_run:
            row = await self._conn.fetchrow(_COUNT, self.result.cutoff)
            self.result.messages, self.result.events = row["messages"], row["events"]
            return self.result
        after: tuple[Any, str] = _START
        while True:
            rows, started = self._pacer.rows, time.monotonic()
            batch = await self.read_batch(after, rows)
            if batch is None:
                break
            await self.remove(batch)
            after = batch.last_key
            if len(batch.messages) < rows:
                self._worked(started)
                break
            await self._rest(len(batch.messages), started)
        await self.remove_orphans()
        self.result.transactions = await delete_transactions(self._conn, self.result.cutoff)
        return self.result

    def _worked(self, started: float) -> float:
        seconds = time.monotonic() - started
        self.result.busy_seconds += seconds
        return seconds

    async def _rest(self, rows: int, started: float) -> None:
        """The pacer's rest after a batch of ``rows`` begun at ``started`` (monotonic)."""
        rest = self._pacer.after_batch(rows, self._worked(started))
        if rest > 0:
            self.result.rest_seconds += rest
            await asyncio.sleep(rest)

    async def remove_orphans(self) -> None:
        """Events past the cutoff whose message is gone: archived to the day of the event
        (``part-<batch>-orphans``), then deleted, with the same journal as a batch."""
        last = 0
        while True:
            size, started = self._pacer.rows, time.monotonic()
            events = await self._conn.fetch(_ORPHANS, self.result.cutoff, last, size)
            if not events:
                break
            ids = [int(row["id"]) for row in events]
            if self._archive is None:
                await self.delete([], ids, [])
            else:
                name = f"{self._stamp}-{self.result.batches:05d}-orphans"
                rows: dict[str, list[Any]] = defaultdict(list)
                for row in events:
                    at: datetime = row["at"]
                    rows[f"{day_dir(Path(), at.date())}/events/part-{name}.parquet"].append(row)
                journal = Journal(name, [], ids, sorted(rows), [])
                write_journal(self._archive, journal, self._modes)
                for file, file_rows in rows.items():
                    self._write(file, "events", file_rows)
                await self.finish(journal)
            self.result.batches += 1
            self.result.orphan_events += len(ids)
            last = ids[-1]
            if len(events) < size:
                self._worked(started)
                break
            await self._rest(len(events), started)

    async def read_batch(self, after: tuple[Any, str], rows: int) -> Batch | None:
        name = f"{self._stamp}-{self.result.batches:05d}"
        async with self._conn.transaction(isolation="repeatable_read", readonly=True):
            messages = await self._conn.fetch(CANDIDATES, self.result.cutoff, *after, rows)
            if not messages:
                return None
            events = []
            if self._archive is not None:
                events = await self._conn.fetch(_EVENTS, [r["message_id"] for r in messages])
        return Batch(name, list(messages), list(events))

    async def remove(self, batch: Batch) -> None:
        if self._archive is None:
            await self.delete(batch.message_ids, [], [])
        else:
            journal = await self.archive(batch)
            await self.finish(journal)
        self.result.batches += 1

    async def archive(self, batch: Batch) -> Journal:
        """Steps 2 and 3: the journal, then the files and the manifests."""
        assert self._archive is not None
        rows, files, late = _batch_files(batch)
        journal = Journal(batch.name, batch.message_ids, [int(r["id"]) for r in batch.events],
                          files, late)
        write_journal(self._archive, journal, self._modes)
        for name in files:
            self._write(name, name.split("/")[1], rows[name])
        self._write_manifests(files)
        return journal

    def _write(self, name: str, table: str, rows: Sequence[Any]) -> None:
        assert self._archive is not None
        write_parquet(self._archive / name, table, rows, self._modes)
        self._written[name] = len(rows)

    async def finish(self, journal: Journal) -> None:
        """Steps 4 and 5 (also the resumption of a journaled batch whose files are all there)."""
        assert self._archive is not None
        await self.delete(journal.message_ids, journal.event_ids, journal.late_files)
        self._write_manifests(journal.files + journal.late_files)
        clear_journal(self._archive)

    async def delete(self, message_ids: list[str], event_ids: list[int],
                     late_files: list[str]) -> None:
        """One transaction: the messages (still final), their late events (archived before
        the commit), then their other events."""
        async with self._conn.transaction():
            gone = await delete_finished_messages(self._conn, message_ids)
            if self._archive is not None:
                late = await take_late_events(self._conn, gone, event_ids, _EVENT_LIST)
                self._write_late(late, late_files)
                self.result.late_events += len(late)
                self.result.events += len(late)
            self.result.events += await delete_events(self._conn, gone, event_ids,
                                                      archived=self._archive is not None)
            self.result.messages += len(gone)
            if self._archive is not None:
                self.result.archived += len(gone)

    def _write_late(self, late: Sequence[Any], late_files: list[str]) -> None:
        """Late events to the ``-late`` file of their message's day (rewritten whole on every
        attempt: a retried delete writes it again with what it deletes then)."""
        assert self._archive is not None
        if not late:
            return
        late_of_day = {name.split("/")[0]: name for name in late_files}
        day_of = self._message_days(late_files)
        by_file: dict[str, list[Any]] = defaultdict(list)
        for row in late:
            by_file[late_of_day[day_of[row["message_id"]]]].append(row)
        for name, rows in by_file.items():
            self._write(name, "events", rows)

    def _message_days(self, late_files: list[str]) -> dict[str, str]:
        """Message id -> its day directory, read back from the batch's message files."""
        import pyarrow.parquet as pq

        assert self._archive is not None
        found: dict[str, str] = {}
        for name in late_files:
            day = name.split("/")[0]
            path = self._archive / name.replace("/events/", "/messages/").replace("-late", "")
            for value in pq.read_table(path, columns=["message_id"]).column(0):
                found[value.as_py()] = day
        return found

    def _write_manifests(self, files: list[str]) -> None:
        assert self._archive is not None
        for day in sorted({name.split("/")[0] for name in files}):
            stamp = date.fromisoformat(day.removeprefix("day="))
            directory = day_dir(self._archive, stamp)
            if directory.is_dir():
                written = {name.split("/", 1)[1]: rows for name, rows in self._written.items()
                           if name.split("/")[0] == day}
                write_manifest(directory, stamp, self._clock, written, self._modes)
                if day not in self.result.days:
                    self.result.days.append(day)

    async def resume(self) -> None:
        """Finishes the batch a previous run journaled (see the module documentation)."""
        assert self._archive is not None
        journal = read_journal(self._archive)
        if journal is None:
            return
        if all((self._archive / name).is_file() for name in journal.files):
            before = self.result.messages
            await self.finish(journal)
            self.result.resumed = self.result.messages - before
        else:
            remove_files(self._archive, journal.files + journal.late_files)
            self._write_manifests(journal.files)
            clear_journal(self._archive)


async def _cutoff(conn: Any, request: RetentionRequest) -> tuple[datetime, datetime]:
    clock: datetime = await conn.fetchval("SELECT now()")
    if request.before is not None:
        return request.before, clock
    assert request.older_than is not None
    return clock - request.older_than, clock


# one row (see rms.store.schema.retention_status), exported by the API's /metrics
_RECORD_RUN = """
INSERT INTO retention_status AS s (id, last_run_at, last_success_at, last_failure_at,
    runs_total, failures_total, messages_removed_total, messages_archived_total,
    events_removed_total)
VALUES (1, now(), CASE WHEN $1 THEN now() END, CASE WHEN $1 THEN NULL ELSE now() END, 1,
        CASE WHEN $1 THEN 0 ELSE 1 END, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET
    last_run_at = now(),
    last_success_at = CASE WHEN $1 THEN now() ELSE s.last_success_at END,
    last_failure_at = CASE WHEN $1 THEN s.last_failure_at ELSE now() END,
    runs_total = s.runs_total + 1,
    failures_total = s.failures_total + CASE WHEN $1 THEN 0 ELSE 1 END,
    messages_removed_total = s.messages_removed_total + $2,
    messages_archived_total = s.messages_archived_total + $3,
    events_removed_total = s.events_removed_total + $4
"""


async def _record(conn: Any, ok: bool, result: RetentionResult | None) -> None:
    """Count the run for /metrics; a database that cannot take it (down, or not migrated)
    changes nothing about the run itself."""
    import asyncpg

    done = result or RetentionResult(cutoff=datetime.now(UTC))
    with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
        await conn.execute(_RECORD_RUN, ok, done.messages, done.archived, done.events)


async def _record_failure(request: RetentionRequest, result: RetentionResult | None) -> None:
    import asyncpg

    try:
        conn = await asyncpg.connect(asyncpg_dsn(request.database_url), timeout=5)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError):
        return
    try:
        await _record(conn, False, result)
    finally:
        await conn.close()


async def _run(request: RetentionRequest) -> RetentionResult:
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(request.database_url),
                                 server_settings={"application_name": "rms-retention"})
    retention: Retention | None = None
    try:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY):
            raise ReportError("another retention run is in progress (advisory lock held)")
        cutoff, clock = await _cutoff(conn, request)
        retention = Retention(conn, request, cutoff, clock)
        result = await retention.run()
        if not request.dry_run:
            await _record(conn, True, result)
        return result
    except (ReportError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
        if retention is not None and not request.dry_run:  # what it removed still counts
            await _record_failure(request, retention.result)
        raise
    finally:
        await conn.close()  # also releases the advisory lock


def run_retention(request: RetentionRequest) -> RetentionResult:
    """Runs retention; ``UsageError`` for a bad request, ``ReportError`` when another run holds
    the lock; asyncpg's and the OS's errors when the database or the disk fails (whatever was
    journaled is finished by the next run)."""
    if (request.older_than is None) == (request.before is None):
        raise UsageError("give exactly one of --older-than and --before")
    if request.archive is not None:
        if request.archive.exists() and not request.archive.is_dir():
            raise UsageError(f"--archive {request.archive} exists and is not a directory")
        make_dirs(request.archive, request.modes)
    return asyncio.run(_run(request))

