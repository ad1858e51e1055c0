"""``rms retention run`` against a real PostgreSQL: what goes and what stays, the archive holds
exactly what left (every column, every event), and a run killed at any point resumes on the
next run with nothing lost and nothing archived twice."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pyarrow.parquet as pq
import pytest

from history.archive import JOURNAL
from history.dburl import asyncpg_dsn
from history.options import ReportError
from history.pacing import Pace
from history.retention import LOCK_KEY, Retention, RetentionRequest, parse_age, run_retention
from rms.cli import main
from tests.integration.retention.history import (
    CUTOFF_AGE,
    archived,
    archived_events,
    fetch,
    seed,
    stored_events,
    stored_ids,
)

pytestmark = pytest.mark.spark  # pyarrow, from the spark extra


def request(url: str, archive: Path | None, **fields: Any) -> RetentionRequest:
    return RetentionRequest(database_url=url, older_than=CUTOFF_AGE, archive=archive,
                            **{"pace": Pace.unpaced(7), **fields})


def test_removes_exactly_the_finished_messages_past_the_age(database_url: str) -> None:
    seeded = seed(database_url)
    result = run_retention(request(database_url, None))
    assert stored_ids(database_url) == seeded.kept
    assert stored_events(database_url, seeded.doomed) == []
    assert (result.messages, result.batches) == (60, 9)  # 8 full batches of 7, then 4
    assert result.events == 4 * 40 + 2 * 20  # done: 4 events each, deleted: 2


def test_archive_holds_every_removed_row_once_by_day(database_url: str, tmp_path: Path) -> None:
    seeded = seed(database_url)
    before = stored_events(database_url, seeded.doomed)
    columns = fetch(database_url, "SELECT message_id, state, payload::text AS payload, "
                    "headers::text AS headers, created_at, done_at, deleted_at FROM messages "
                    "WHERE message_id = ANY($1::text[])", sorted(seeded.doomed))
    archive = tmp_path / "archive"
    result = run_retention(request(database_url, archive))

    messages = archived(archive, "messages")
    assert Counter(r["message_id"] for r in messages) == Counter(seeded.doomed)  # once each
    assert archived_events(archive) == before  # every event, every column
    by_id = {r["message_id"]: r for r in messages}
    for row in columns:
        kept = by_id[row["message_id"]]
        assert json.loads(kept["payload"]) == json.loads(row["payload"])
        assert json.loads(kept["headers"]) == {"trace": "t"}
        for name in ("state", "created_at", "done_at", "deleted_at"):
            assert kept[name] == row[name], name
    assert stored_ids(database_url) == seeded.kept
    assert not (archive / JOURNAL).exists()
    # one directory per creation day, each an `rms export` directory with its manifest
    assert len(result.days) == 3
    for day in sorted(archive.glob("day=*")):
        manifest = json.loads((day / "_export.json").read_text())
        assert manifest["format"] == "rms-history-export"
        rows = pq.read_table(day / "messages").to_pylist()
        assert {r["created_at"].date().isoformat() for r in rows} == {day.name[4:]}
        assert manifest["tables"]["messages"]["rows"] == len(rows)
        assert manifest["tables"]["events"]["rows"] == pq.read_table(day / "events").num_rows
        assert manifest["since"].startswith(day.name[4:])


def test_events_written_after_the_batch_was_read_are_archived_too(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A publish outcome recorded between the read and the delete (no row lock stops it)."""
    seeded = seed(database_url, finished=5)
    original = Retention.delete

    async def late_event_then_delete(self: Retention, message_ids: list[str],
                                     event_ids: list[int], late_files: list[str]) -> None:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        await conn.execute("INSERT INTO message_events (message_id, event, actor, detail) "
                           "VALUES ($1, 'published', 'worker:x', '{\"late\": true}')",
                           message_ids[0])
        await conn.close()
        await original(self, message_ids, event_ids, late_files)

    monkeypatch.setattr(Retention, "delete", late_event_then_delete)
    archive = tmp_path / "archive"
    result = run_retention(request(database_url, archive))
    assert result.late_events == 1
    assert stored_events(database_url, seeded.doomed) == []
    late = [r for r in archived(archive, "events") if json.loads(r["detail"]) == {"late": True}]
    assert len(late) == 1
    assert len(list(archive.glob("day=*/events/part-*-late.parquet"))) == 1


def test_old_events_of_vanished_messages_are_archived_and_removed(
        database_url: str, tmp_path: Path) -> None:
    seed(database_url, finished=3)
    add = ("INSERT INTO message_events (message_id, at, event, actor, detail) "
           "VALUES ($1, now() - $2::interval, 'published', 'worker:x', '{}')")
    fetch(database_url, add + " RETURNING id", "vanished", timedelta(days=45))
    fetch(database_url, add + " RETURNING id", "vanished-recently", timedelta(days=1))
    archive = tmp_path / "archive"
    result = run_retention(request(database_url, archive, pace=Pace.unpaced(2)))
    assert result.orphan_events == 1
    left = fetch(database_url, "SELECT DISTINCT message_id FROM message_events "
                 "WHERE message_id LIKE 'vanished%'")
    assert left == [{"message_id": "vanished-recently"}]
    orphans = [r for r in archived(archive, "events") if r["message_id"] == "vanished"]
    assert len(orphans) == 1
    assert len(list(archive.glob("day=*/events/part-*-orphans.parquet"))) == 1


def test_dry_run_counts_and_changes_nothing(database_url: str, tmp_path: Path) -> None:
    seed(database_url)
    before = stored_ids(database_url)
    result = run_retention(request(database_url, tmp_path / "a", dry_run=True))
    assert (result.messages, result.events) == (60, 200)
    assert stored_ids(database_url) == before
    assert list((tmp_path / "a").glob("day=*")) == []


def test_one_run_at_a_time(database_url: str) -> None:
    async def while_locked() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            assert await conn.fetchval("SELECT pg_try_advisory_lock($1)", LOCK_KEY)
            with pytest.raises(ReportError, match="in progress"):
                await asyncio.to_thread(run_retention, request(database_url, None))
        finally:
            await conn.close()

    seeded = seed(database_url, finished=3)
    asyncio.run(while_locked())
    assert seeded.doomed <= stored_ids(database_url)


def test_cli(database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(database_url)
    assert main(["retention", "run", "--older-than", "30x", "--database-url", database_url]) == 2
    assert "30x" in capsys.readouterr().err
    assert main(["retention", "run", "--older-than", "30d", "--database-url", database_url,
                 "--archive", str(tmp_path / "a"), "--batch-size", "25"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("rms retention run: 60 messages and 200 events finished before ")
    assert "removed in 3 batches, archived to" in out
    assert parse_age("12h").total_seconds() == 43200


# --- crashes ------------------------------------------------------------------------------

# Runs `rms retention run ARGS` with one function replaced by a process exit (no cleanup, no
# `finally`) on its Nth call: the closest a test gets to `kill -9` at a chosen point.
_CRASHING = """
import asyncio, os, sys
import history.retention as r
from rms.cli import main
point, nth, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
calls = [0]
def crash_now():
    calls[0] += 1
    if calls[0] == nth:
        os._exit(9)
if point == "write_table":  # dies inside a Parquet write: a hidden partial file is left
    import pyarrow.parquet as pq
    original_write = pq.write_table
    def replaced_write(table, where, *a, **k):
        calls[0] += 1
        if calls[0] == nth:
            open(where, "wb").write(b"PAR1 half")
            os._exit(9)
        return original_write(table, where, *a, **k)
    pq.write_table = replaced_write
elif point == "delete":
    original = r.Retention.delete
    async def replaced(self, *a):
        crash_now()
        await original(self, *a)
    r.Retention.delete = replaced
else:
    original_fn = getattr(r, point)
    def replaced_fn(*a):
        crash_now()
        return original_fn(*a)
    setattr(r, point, replaced_fn)
sys.exit(main(args))
"""


@pytest.mark.parametrize(("point", "nth"), [
    ("delete", 2),  # the second batch archived and journaled, its delete never ran
    ("write_parquet", 5),  # inside the archive of a batch: some of its files written
    ("write_table", 5),  # inside the write of one file: a hidden half-written file left
    ("clear_journal", 2),  # the second batch deleted, its journal still there
])
def test_a_run_killed_anywhere_resumes_without_loss_or_duplicates(
        database_url: str, tmp_path: Path, point: str, nth: int) -> None:
    seeded = seed(database_url)
    before = stored_events(database_url, seeded.doomed)
    archive = tmp_path / "archive"
    args = ["retention", "run", "--older-than", "30d", "--database-url", database_url,
            "--archive", str(archive), "--batch-size", "7"]
    crashed = subprocess.run([sys.executable, "-c", _CRASHING, point, str(nth), *args],
                             capture_output=True, text=True, timeout=60, check=False)
    assert crashed.returncode == 9, crashed.stderr
    assert (archive / JOURNAL).is_file()  # it died with a batch in flight
    if point == "write_table":
        assert list(archive.glob("day=*/*/.part-*.tmp"))
    assert seeded.doomed & stored_ids(database_url)  # and with work left

    resumed = subprocess.run([sys.executable, "-m", "rms.cli", *args], capture_output=True,
                             text=True, timeout=60, check=False)
    assert resumed.returncode == 0, resumed.stderr
    # only a batch archived but not deleted is finished by the resume; the others had either
    # deleted nothing yet (archived again from scratch) or committed already
    finished = "; 7 of them finish an interrupted run" in resumed.stdout
    assert finished == (point == "delete"), resumed.stdout

    assert stored_ids(database_url) == seeded.kept
    assert Counter(r["message_id"] for r in archived(archive, "messages")) == Counter(
        seeded.doomed)
    assert archived_events(archive) == before
    assert not (archive / JOURNAL).exists()
    assert not list(archive.glob("day=*/*/.*"))  # no hidden partial file left behind
    for day in archive.glob("day=*"):  # manifests agree with the files
        manifest = json.loads((day / "_export.json").read_text())
        assert manifest["tables"]["messages"]["rows"] == pq.read_table(day / "messages").num_rows


def test_a_finished_transaction_goes_once_its_messages_are_gone(database_url: str) -> None:
    """Old finished messages that belong to transactions are removed like any other, and the
    transaction row goes with the last of them; a pending one, and one whose message stays,
    are kept."""
    seed(database_url)
    old = "now() - interval '40 days'"
    fetch(database_url, f"""
        WITH t AS (
            INSERT INTO transactions (transaction_id, app, check_url, message_ids, state,
                                      check_after_seconds, max_checks, created_at,
                                      confirmed_at, cancelled_at)
            VALUES ('tx-done', 'shop', 'http://x/c', '{{old-00001}}', 'confirmed', 10, 15,
                    {old}, {old}, NULL),
                   ('tx-kept', 'shop', 'http://x/c', '{{open-sent-0}}', 'confirmed', 10, 15,
                    {old}, {old}, NULL),
                   ('tx-pending', 'shop', 'http://x/c', '{{}}', 'pending', 10, 15,
                    {old}, NULL, NULL)
            RETURNING 1)
        UPDATE messages SET transaction_id = CASE message_id WHEN 'old-00001' THEN 'tx-done'
                                                             ELSE 'tx-kept' END,
                            transaction_position = 0
        WHERE message_id IN ('old-00001', 'open-sent-0') RETURNING message_id""")
    result = run_retention(request(database_url, None))
    left = {r["transaction_id"] for r in fetch(database_url,
                                               "SELECT transaction_id FROM transactions")}
    assert left == {"tx-kept", "tx-pending"}
    assert result.transactions == 1
    assert "old-00001" not in stored_ids(database_url)


def test_the_archive_keeps_each_consumers_ack(database_url: str, tmp_path: Path) -> None:
    seeded = seed(database_url, finished=2, days=1)
    fetch(database_url, "UPDATE messages SET subscribers = '{invoices,points}', acks = "
          "'{\"points\": {\"at\": \"2026-11-01T00:00:00.000000Z\", \"via\": \"http\"}}' "
          "WHERE message_id = ANY($1::text[]) RETURNING message_id", sorted(seeded.doomed))
    run_retention(request(database_url, tmp_path / "archive"))
    rows = archived(tmp_path / "archive", "messages")
    assert rows and {r["message_id"] for r in rows} == seeded.doomed
    for row in rows:
        assert json.loads(row["subscribers"]) == ["invoices", "points"]
        assert json.loads(row["acks"])["points"]["via"] == "http"
