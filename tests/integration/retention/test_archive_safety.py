"""The retention archive against a real PostgreSQL: a journal is untrusted input (names
outside the layout or the archive are refused, a corrupt one is a one-line error), the archive
is owner-only unless configured otherwise, the day manifests are kept incrementally (no
Parquet footer re-read per batch), an event committed while a batch is deleted is never
deleted unarchived, and every run is counted for Prometheus."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import asyncpg
import pyarrow.parquet as pq
import pytest

from history.archive import JOURNAL, JournalError
from history.dburl import asyncpg_dsn
from history.pacing import Pace
from history.retention import Retention, RetentionRequest, run_retention
from rms.cli import main
from tests.integration.retention.history import CUTOFF_AGE, archived, fetch, seed, stored_events
from tests.support import Api

pytestmark = pytest.mark.spark  # pyarrow, from the spark extra


def _request(url: str, archive: Path | None, **fields: Any) -> RetentionRequest:
    return RetentionRequest(database_url=url, older_than=CUTOFF_AGE, archive=archive,
                            **{"pace": Pace.unpaced(7), **fields})


def _journal(archive: Path, **changes: Any) -> None:
    archive.mkdir(parents=True, exist_ok=True)
    body = {"batch": "b", "message_ids": [], "event_ids": [],
            "files": ["day=2026-01-01/messages/part-b.parquet"], "late_files": []} | changes
    (archive / JOURNAL).write_text(json.dumps(body))


@pytest.mark.parametrize("name", [
    "../victim",
    "day=2026-01-01/messages/../../../victim",
    "day=2026-01-01/messages/part-x.parquet/../../../../victim",
    "/tmp/victim",
    "day=2026-13-01/messages/part-x.parquet",  # no such day
    "day=2026-01-01/other/part-x.parquet",
    "day=2026-01-01/messages/part-x.json",
])
def test_a_journal_naming_anything_but_a_part_file_is_refused(
        database_url: str, tmp_path: Path, name: str) -> None:
    archive = tmp_path / "archive"
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    for key in ("files", "late_files"):
        _journal(archive, **{key: [name]})
        with pytest.raises(JournalError, match="not one retention wrote"):
            run_retention(_request(database_url, archive))
        assert victim.read_text() == "keep me"
        assert (archive / JOURNAL).is_file()  # left for the operator


def test_a_journal_file_behind_a_link_out_of_the_archive_is_refused(
        database_url: str, tmp_path: Path) -> None:
    archive, outside = tmp_path / "archive", tmp_path / "outside"
    (outside / "messages").mkdir(parents=True)
    victim = outside / "messages" / "part-b.parquet"
    victim.write_text("keep me")
    _journal(archive, files=["day=2026-01-01/messages/part-b.parquet"])
    (archive / "day=2026-01-01").symlink_to(outside)
    with pytest.raises(JournalError, match="leads outside the archive"):
        run_retention(_request(database_url, archive))
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("content", ["{not json", '{"batch": "b"}', '["a"]',
                                     '{"batch": "b", "message_ids": [1], "event_ids": [], '
                                     '"files": [], "late_files": []}'])
def test_a_corrupt_journal_is_one_line_with_the_way_out(
        database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        content: str) -> None:
    seeded = seed(database_url, finished=3)
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / JOURNAL).write_text(content)
    code = main(["retention", "run", "--older-than", "30d", "--database-url", database_url,
                 "--archive", str(archive)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "not one retention wrote" in err and "Move it out of the archive" in err
    assert seeded.doomed <= set(r["message_id"] for r in fetch(
        database_url, "SELECT message_id FROM messages"))  # nothing deleted


def _modes(archive: Path) -> set[tuple[str, int]]:
    found = {("dir", stat.S_IMODE(archive.stat().st_mode))}
    for path in archive.rglob("*"):
        found.add(("dir" if path.is_dir() else "file", stat.S_IMODE(path.stat().st_mode)))
    return found


def test_the_archive_is_owner_only_unless_configured(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    os.umask(0o022)
    seed(database_url, finished=10)
    archive = tmp_path / "private" / "archive"
    args = ["retention", "run", "--older-than", "30d", "--database-url", database_url,
            "--archive", str(archive), "--batch-size", "4"]
    assert main(args) == 0
    assert _modes(archive) == {("dir", 0o700), ("file", 0o600)}
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o700

    seed(database_url, finished=10, prefix="more")
    shared = tmp_path / "shared"
    monkeypatch.setenv("RMS_RETENTION_ARCHIVE_FILE_MODE", "0640")
    assert main([*args[:-3], str(shared), "--batch-size", "4"]) == 0
    assert _modes(shared) == {("dir", 0o750), ("file", 0o640)}
    monkeypatch.setenv("RMS_RETENTION_ARCHIVE_FILE_MODE", "0999")
    capsys.readouterr()
    assert main(args) == 2
    assert "RETENTION_ARCHIVE_FILE_MODE" in capsys.readouterr().err.upper()


def test_manifests_are_kept_without_rereading_the_archive(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Footers are read only for files no manifest counted (written by a run that died)."""
    reads: list[str] = []
    original = pq.read_metadata

    def counted(where: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(str(where))
        return original(where, *args, **kwargs)

    monkeypatch.setattr(pq, "read_metadata", counted)
    seed(database_url)
    archive = tmp_path / "archive"
    result = run_retention(_request(database_url, archive, pace=Pace.unpaced(3)))
    assert result.batches >= 20
    assert reads == []

    for day in archive.glob("day=*"):
        manifest = json.loads((day / "_export.json").read_text())
        for table in ("messages", "events"):
            entry = manifest["tables"][table]
            actual = {p.name: original(p).num_rows for p in (day / table).glob("part-*")}
            assert entry["parts"] == actual
            assert entry["rows"] == sum(actual.values())
            assert entry["files"] == sorted(actual)
    # a manifest that lost its counts (an older one): each file's footer is read once
    day = sorted(archive.glob("day=*"))[0]
    manifest = json.loads((day / "_export.json").read_text())
    for table in ("messages", "events"):
        del manifest["tables"][table]["parts"]
    (day / "_export.json").write_text(json.dumps(manifest))
    seed(database_url, finished=2, prefix="again")
    run_retention(_request(database_url, archive, pace=Pace.unpaced(3)))
    assert sorted(reads) == sorted(set(reads))
    assert {Path(r).parent.parent for r in reads} <= {day}


def test_an_event_committed_during_the_delete_is_never_lost(
        database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An event committed between the delete of the late events and the delete of the
    batch's other events: it is archived (now or by a later run), never only deleted."""
    seeded = seed(database_url, finished=3)
    original = Retention._write_late
    injected: list[str] = []

    def commit_an_event(self: Retention, late: Any, late_files: list[str]) -> None:
        if not injected:
            message_id = sorted(seeded.doomed)[0]

            async def add() -> None:
                conn = await asyncpg.connect(asyncpg_dsn(database_url))
                try:
                    await conn.execute(
                        "INSERT INTO message_events (message_id, event, actor, detail) VALUES "
                        "($1, 'published', 'worker:x', '{\"racing\": true}')", message_id)
                finally:
                    await conn.close()

            other = threading.Thread(target=asyncio.run, args=(add(),))
            other.start()  # another session, committed before the delete goes on
            other.join(timeout=30)
            injected.append(message_id)
        original(self, late, late_files)

    monkeypatch.setattr(Retention, "_write_late", commit_an_event)
    archive = tmp_path / "archive"
    run_retention(_request(database_url, archive, pace=Pace.unpaced(50)))
    assert injected

    stored = [e for e in stored_events(database_url, set(injected)) if e[5] == {"racing": True}]
    kept = [r for r in archived(archive, "events") if json.loads(r["detail"]) == {"racing": True}]
    assert len(stored) + len(kept) == 1


def test_every_run_is_counted_for_prometheus(database_url: str, tmp_path: Path) -> None:
    def status() -> dict[str, Any]:
        [row] = fetch(database_url, "SELECT * FROM retention_status")
        return dict(row)

    seed(database_url, finished=10)
    run_retention(_request(database_url, tmp_path / "archive"))
    first = status()
    assert (first["runs_total"], first["failures_total"]) == (1, 0)
    assert first["messages_removed_total"] == first["messages_archived_total"] > 0
    assert first["last_success_at"] == first["last_run_at"]
    assert first["last_failure_at"] is None

    _journal(tmp_path / "archive", files=["../victim"])
    with pytest.raises(JournalError):
        run_retention(_request(database_url, tmp_path / "archive"))
    second = status()
    assert (second["runs_total"], second["failures_total"]) == (2, 1)
    assert second["last_failure_at"] == second["last_run_at"] > first["last_run_at"]
    assert second["last_success_at"] == first["last_success_at"]
    run_retention(_request(database_url, None, dry_run=True))
    assert status()["runs_total"] == 2  # a dry run changes nothing, counts nothing


async def test_the_api_exports_what_retention_recorded(api: Api, database_url: str,
                                                       tmp_path: Path) -> None:
    before = (await api.client.get("/metrics")).text
    assert "rms_retention_runs_total 0.0" in before
    assert "rms_retention_last_run_timestamp_seconds" not in before
    await asyncio.to_thread(seed, database_url, finished=10)
    await asyncio.to_thread(run_retention, _request(database_url, tmp_path / "archive"))

    text = (await api.client.get("/metrics")).text

    [row] = await asyncio.to_thread(fetch, database_url, "SELECT * FROM retention_status")
    assert "rms_retention_runs_total 1.0" in text
    assert "rms_retention_failures_total 0.0" in text
    assert f"rms_retention_messages_removed_total {row['messages_removed_total']}.0" in text
    assert f"rms_retention_messages_archived_total {row['messages_archived_total']}.0" in text
    [stamp] = [float(line.split()[1]) for line in text.splitlines()
               if line.startswith("rms_retention_last_success_timestamp_seconds ")]
    assert stamp == pytest.approx(row["last_success_at"].timestamp(), abs=1e-3)
