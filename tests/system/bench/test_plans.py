"""``bench.plans`` on a real PostgreSQL holding finished messages: every hot statement is
explained with ANALYZE and BUFFERS, none reads the message tables with a sequential scan, and
nothing the explained statements did is left behind."""

from __future__ import annotations

import asyncio

import pytest

from bench import plans as planner
from bench import seed as seeder
from history.dburl import asyncpg_dsn
from tests.system.bench.test_seed import one

HOT = ["prepare", "confirm", "ack", "checkback-claim", "redelivery-claim",
       "retention-candidates", "retention-delete-messages", "retention-delete-events"]


def test_the_hot_statements_use_indexes_and_change_nothing(
        database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(seeder.seed(asyncpg_dsn(database_url), 20_000, months=3))
    counts = "SELECT (SELECT count(*) FROM messages) AS m, (SELECT count(*) FROM message_events) AS e"
    before = one(database_url, counts)
    plans = asyncio.run(planner.explain(asyncpg_dsn(database_url)))
    assert [plan.name for plan in plans] == HOT
    for plan in plans:
        assert plan.lines[-1].startswith("Execution Time:"), plan.render()
        assert any("Buffers:" in line for line in plan.lines), plan.render()
        assert not plan.seq_scan, plan.render()
        assert all(len(line) < 300 for line in plan.lines)  # a batch's ids are cut
    assert "rows=1 " in plans[0].render() or "rows=1)" in plans[0].render()
    assert one(database_url, counts) == before
    assert planner.main(["--database-url", database_url]) == 0
    out = capsys.readouterr().out
    assert "== prepare: indexed" in out and "== retention-delete-events: indexed" in out


def test_a_sequential_scan_is_found() -> None:
    plan = planner.Plan("x", ["Seq Scan on messages m  (cost=0.00..1.00 rows=1 width=8)",
                              "Execution Time: 0.10 ms"])
    assert plan.seq_scan and plan.execution_ms == 0.1 and "SEQ SCAN" in plan.render()
    assert not planner.Plan("y", ["Seq Scan on apps  (cost=0.00..1.00 rows=1)"]).seq_scan


def test_a_database_without_apps_is_a_clear_error(database_url: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert planner.main(["--database-url", database_url]) == 2
    assert "seed it first" in capsys.readouterr().err


def test_an_unreachable_database_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert planner.main(["--database-url", "postgresql://rms@127.0.0.1:1/rms"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m bench.plans: failed: ") and err.count("\n") == 1
