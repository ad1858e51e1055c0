"""``rms retention run``'s pace against a real PostgreSQL: it rests after every batch so that it
works at most its duty cycle of the time, rests longer when a batch is slowed by the database
(here: a row lock held by another transaction), and takes its pace from the settings and
options, refusing bad ones with a one-line error."""

from __future__ import annotations

import asyncio
import threading
import time

import asyncpg
import pytest

from history.dburl import asyncpg_dsn
from history.pacing import Pace
from history.retention import RetentionRequest, run_retention
from rms.cli import main
from tests.integration.retention.history import CUTOFF_AGE, fetch, seed, stored_ids

pytestmark = pytest.mark.spark  # pyarrow, from the spark extra


def test_a_run_works_at_most_its_duty_cycle(database_url: str) -> None:
    seeded = seed(database_url)  # 60 finished messages past the cutoff
    started = time.monotonic()
    result = run_retention(RetentionRequest(
        database_url, older_than=CUTOFF_AGE,
        pace=Pace(duty=0.2, batch_seconds=None, max_rows=10)))
    wall = time.monotonic() - started
    assert result.messages == 60 and not seeded.doomed & stored_ids(database_url)
    assert result.batches == 6 and result.busy_seconds > 0
    assert result.rest_seconds >= 4 * result.busy_seconds * 0.999  # 0.8 / 0.2 of the work
    assert wall >= result.busy_seconds + result.rest_seconds


def test_a_batch_slowed_by_the_database_is_followed_by_a_longer_rest(database_url: str
                                                                      ) -> None:
    seed(database_url)
    # the first message of the third batch of 10, in the order retention reads them
    third = fetch(database_url, "SELECT message_id FROM messages WHERE message_id LIKE 'old-%' "
                  "ORDER BY created_at, message_id OFFSET 20 LIMIT 1")[0]["message_id"]
    locked, release = threading.Event(), threading.Event()

    async def hold_lock() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            async with conn.transaction():
                await conn.execute("SELECT 1 FROM messages WHERE message_id = $1 FOR UPDATE",
                                   third)
                locked.set()
                await asyncio.to_thread(release.wait, 10)
        finally:
            await conn.close()

    holder = threading.Thread(target=asyncio.run, args=(hold_lock(),))
    holder.start()
    assert locked.wait(10)
    threading.Timer(0.6, release.set).start()
    try:
        result = run_retention(RetentionRequest(
            database_url, older_than=CUTOFF_AGE,
            pace=Pace(duty=0.5, batch_seconds=None, max_rows=10)))
    finally:
        release.set()
        holder.join(10)
    assert result.messages == 60 and result.busy_seconds >= 0.2  # a batch waited
    # at duty 0.5 a quiet run rests exactly as long as it works: the locked batch's rest is
    # stretched by how much more each of its messages cost
    assert result.rest_seconds >= 1.5 * result.busy_seconds


def test_the_pace_comes_from_the_settings_and_the_options(
        database_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    seed(database_url)
    monkeypatch.setenv("RMS_RETENTION_DUTY_CYCLE", "1.5")
    assert main(["retention", "run", "--database-url", database_url]) == 2
    err = capsys.readouterr().err
    assert "RMS_RETENTION_DUTY_CYCLE" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as refused:
        main(["retention", "run", "--database-url", database_url, "--duty-cycle", "0"])
    assert refused.value.code == 2
    assert "--duty-cycle" in capsys.readouterr().err
    monkeypatch.setenv("RMS_RETENTION_DUTY_CYCLE", "0.5")
    assert main(["retention", "run", "--database-url", database_url, "--batch-size", "20",
                 "--batch-seconds", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "60 messages and 200 events" in out[0] and "in 3 batches" in out[0]
    assert out[1].startswith("rms retention run: pace: ") and "duty cycle 0.5" in out[1]
    assert "messages a day" in out[1]
