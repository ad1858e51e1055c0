"""The full-database seeder (``bench.seed``) on a real PostgreSQL: done messages with their four
events in order, spread over the months asked and over apps and topics, the statistics
refreshed, the secondary indexes back after a rebuild, and retention removing what is past
its age."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from bench import seed as seeder
from history.dburl import asyncpg_dsn
from history.pacing import Pace
from history.retention import RetentionRequest, run_retention


async def _one(url: str, sql: str) -> Any:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return await conn.fetchrow(sql)
    finally:
        await conn.close()


def one(url: str, sql: str) -> Any:
    return asyncio.run(_one(url, sql))


@pytest.mark.parametrize("rebuild", [False, True])
def test_seeds_done_messages_with_their_events(database_url: str, rebuild: bool,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seeder, "CHUNK", 700)  # several chunks
    indexes = "SELECT count(*) AS n FROM pg_indexes WHERE tablename IN " \
              "('messages', 'message_events')"
    before = one(database_url, indexes)["n"]
    seeded = asyncio.run(seeder.seed(asyncpg_dsn(database_url), 2000, months=3,
                                     rebuild_indexes=rebuild))
    assert one(database_url, indexes)["n"] == before
    row = one(database_url, """
        SELECT count(*) AS messages, count(DISTINCT app) AS apps, count(DISTINCT topic) AS topics,
               bool_and(state = 'done' AND NOT dead) AS done,
               bool_and(created_at < confirmed_at AND confirmed_at < done_at) AS ordered,
               max(now() - created_at) AS oldest, min(now() - created_at) AS newest
        FROM messages""")
    assert (row["messages"], row["apps"], row["topics"], row["done"], row["ordered"]) == (
        2000, 5, 20, True, True)
    assert timedelta(days=89) < row["oldest"] <= timedelta(days=90, hours=1)
    assert timedelta(minutes=59) < row["newest"] < timedelta(hours=2)
    events = one(database_url, """
        SELECT sum(n) AS n, count(*) AS messages,
               bool_and(names = ARRAY['prepared', 'confirmed', 'published', 'acked']) AS order
        FROM (SELECT message_id, array_agg(event ORDER BY at) AS names, count(*) AS n
              FROM message_events GROUP BY message_id) AS e""")
    assert (events["n"], events["messages"], events["order"]) == (8000, 2000, True)
    assert one(database_url, "SELECT count(*) AS n FROM pg_stat_user_tables WHERE relname IN "
               "('messages', 'message_events') AND last_analyze IS NOT NULL "
               "AND last_vacuum IS NOT NULL")["n"] == 2  # vacuumed, as months would have
    sizes = {s.table: s for s in seeded.sizes}
    assert sizes["messages"].heap > 2000 * 200 and sizes["message_events"].indexes > 0
    assert "seeded 2,000 done messages and 8,000 events in " in seeded.render()


def test_retention_removes_the_seeded_messages_past_its_age(database_url: str) -> None:
    asyncio.run(seeder.seed(asyncpg_dsn(database_url), 900, months=3))
    result = run_retention(RetentionRequest(database_url, older_than=timedelta(days=30),
                                            pace=Pace.unpaced(500)))
    assert 580 <= result.messages <= 620  # two of the three months
    assert result.events == 4 * result.messages


def test_bad_input_is_one_line_and_an_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    unreachable = "postgresql://rms@127.0.0.1:1/rms"
    assert seeder.main(["--database-url", unreachable, "--messages", "10"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m bench.seed: failed: ") and err.count("\n") == 1
    assert seeder.main(["--database-url", "mysql://x"]) == 2
    assert "cannot be parsed" in capsys.readouterr().err
    for bad in (["--messages", "0"], ["--months", "-1"]):
        with pytest.raises(SystemExit) as refused:
            seeder.main(["--database-url", unreachable, *bad])
        assert refused.value.code == 2
