"""Retention designs compared: batched deletes on the real schema against time-partitioned
tables whose old partitions are detached and dropped.

    .venv/bin/python -m bench.retention_layouts --rows 100000 --batch-size 5000

Each layout gets its own database in a scratch embedded PostgreSQL, ``--rows`` finished
messages (with four events each) spread over ``--days`` days older than the retention age,
and then, while a few connections write like the request path (prepare: insert a message and
its event; confirm: a guarded update and its event; one transaction each), the removal runs:

* ``batched``: ``rms retention run`` itself (``history.retention``, no archive) on the schema of
  the migrations, unpaced: ``--batch-size`` messages per transaction, one after the other;
* ``partitioned``: ``messages`` and ``message_events`` partitioned by day (``created_at`` and
  ``at``), each old day ``DETACH PARTITION ... CONCURRENTLY`` then ``DROP TABLE``. The
  primary key has to include the partition column, ``(message_id, created_at)``: PostgreSQL
  cannot enforce a service-wide unique ``message_id`` on it, which the contract requires
  (design section 4), and a day can only be dropped once *every* message created that day
  is finished and not dead (open and dead ones would first have to be moved out).

Printed per layout: removal throughput (messages and events per second) and the request-path
latency (p50, p99, max) before and during the removal. Figures depend on the machine and on
what else runs on it; say which when quoting them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from history.pacing import Pace
from history.retention import RetentionRequest, run_retention
from rms.devstack.embedded import EmbeddedPostgres
from rms.store.migrate import upgrade

WRITERS = 4
AGE = timedelta(days=30)

_SEED_APP = ("INSERT INTO apps (name, api_key_hash, signing_secret) VALUES "
             "('bench', 'hash-bench', 's') ON CONFLICT DO NOTHING")
# finished messages: day i % days, done 3 s after creation, 40+ days ago
_SEED_MESSAGES = """
INSERT INTO {table} (message_id, app, topic, payload, check_url, state, check_count,
    delivery_count, check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries,
    created_at, confirmed_at, done_at)
SELECT 'old-' || i, 'bench', 'orders.paid', jsonb_build_object('order', i, 'total', 12.5),
    'http://127.0.0.1/c', 'done', 0, 1, 10, 15, 60, 6, t, t + interval '1 s', t + interval '3 s'
FROM (SELECT i, date_trunc('day', now()) - interval '40 days' - (i % $1) * interval '1 day'
             + (i % 86000) * interval '1 s' AS t
      FROM generate_series(1, $2) AS i) AS s
"""
_SEED_EVENTS = """
INSERT INTO {table} (message_id, at, event, actor, detail)
SELECT m.message_id, m.created_at + e.n * interval '1 s', e.name, 'app:bench',
       jsonb_build_object('n', e.n)
FROM {messages} AS m,
     (VALUES (0, 'prepared'), (1, 'confirmed'), (2, 'published'), (3, 'acked')) AS e(n, name)
"""

_PARTITIONED_DDL = """
CREATE TABLE messages_p (LIKE messages INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (created_at);
ALTER TABLE messages_p ADD PRIMARY KEY (message_id, created_at);
CREATE INDEX ON messages_p (created_at, message_id);
CREATE TABLE message_events_p (LIKE message_events INCLUDING DEFAULTS)
    PARTITION BY RANGE (at);
CREATE SEQUENCE message_events_p_id;
ALTER TABLE message_events_p ALTER COLUMN id SET DEFAULT nextval('message_events_p_id');
CREATE INDEX ON message_events_p (message_id, id);
"""


@dataclass
class Latency:
    requests: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, samples: list[float]) -> Latency:
        ordered = sorted(samples) or [0.0]
        return cls(len(samples), round(statistics.median(ordered) * 1000, 2),
                   round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
                   round(ordered[-1] * 1000, 2))


@dataclass
class LayoutResult:
    layout: str
    messages: int
    events: int
    seconds: float
    messages_per_second: float
    events_per_second: float
    idle: Latency
    during: Latency


class Writers:
    """``WRITERS`` connections writing like the request path until stopped; latencies kept."""

    def __init__(self, dsn: str, messages: str, events: str) -> None:
        self._dsn, self._messages, self._events = dsn, messages, events
        self.samples: list[float] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Writers:
        import asyncpg

        self._conns = [await asyncpg.connect(self._dsn) for _ in range(WRITERS)]
        self._tasks = [asyncio.create_task(self._loop(c, n)) for n, c in enumerate(self._conns)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        for conn in self._conns:
            await conn.close()

    async def _loop(self, conn: Any, writer: int) -> None:
        n = 0
        while not self._stop.is_set():
            message_id = f"new-{writer}-{n}-{time.monotonic_ns()}"
            await self._timed(conn, self._prepare, message_id)
            await self._timed(conn, self._confirm, message_id)
            n += 1

    async def _timed(self, conn: Any, step: Callable[[Any, str], Awaitable[None]],
                     message_id: str) -> None:
        started = time.perf_counter()
        async with conn.transaction():
            await step(conn, message_id)
        self.samples.append(time.perf_counter() - started)

    async def _prepare(self, conn: Any, message_id: str) -> None:
        await conn.execute(
            f"INSERT INTO {self._messages} (message_id, app, topic, payload, check_url, state, "
            "check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, "
            "next_check_at) VALUES ($1, 'bench', 'orders.paid', '{\"n\": 1}', "
            "'http://127.0.0.1/c', 'pending-send', 10, 15, 60, 6, now() + interval '10 s')",
            message_id)
        await conn.execute(f"INSERT INTO {self._events} (message_id, event, actor) "
                           "VALUES ($1, 'prepared', 'app:bench')", message_id)

    async def _confirm(self, conn: Any, message_id: str) -> None:
        await conn.execute(
            f"UPDATE {self._messages} SET state = 'sent', confirmed_at = now(), "
            "delivery_count = 1, next_check_at = NULL WHERE message_id = $1 "
            "AND state = 'pending-send'", message_id)
        await conn.execute(f"INSERT INTO {self._events} (message_id, event, actor) "
                           "VALUES ($1, 'confirmed', 'app:bench')", message_id)


async def _idle(dsn: str, messages: str, events: str, seconds: float) -> Latency:
    async with Writers(dsn, messages, events) as writers:
        await asyncio.sleep(seconds)
    return Latency.of(writers.samples)


async def _during(dsn: str, messages: str, events: str,
                  removal: Callable[[], Awaitable[tuple[int, int]]]
                  ) -> tuple[Latency, float, int, int]:
    async with Writers(dsn, messages, events) as writers:
        started = time.perf_counter()
        removed, removed_events = await removal()
        seconds = time.perf_counter() - started
    return Latency.of(writers.samples), seconds, removed, removed_events


async def _seed(dsn: str, messages: str, events: str, rows: int, days: int,
                ddl: str = "") -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        if ddl:
            await conn.execute(ddl)
        await conn.execute(_SEED_APP)
        await conn.execute(_SEED_MESSAGES.format(table=messages), days, rows)
        await conn.execute(_SEED_EVENTS.format(table=events, messages=messages))
        await conn.execute(f"VACUUM ANALYZE {messages}")
        await conn.execute(f"VACUUM ANALYZE {events}")
    finally:
        await conn.close()


async def batched(server: EmbeddedPostgres, rows: int, days: int, batch_size: int,
                  idle_seconds: float) -> LayoutResult:
    server.create_database("layout_batched")
    await asyncio.to_thread(upgrade, server.url("layout_batched"))
    dsn = server.dsn("layout_batched")
    await _seed(dsn, "messages", "message_events", rows, days)
    idle = await _idle(dsn, "messages", "message_events", idle_seconds)

    async def removal() -> tuple[int, int]:
        result = await asyncio.to_thread(run_retention, RetentionRequest(
            server.url("layout_batched"), older_than=AGE, pace=Pace.unpaced(batch_size)))
        return result.messages, result.events

    during, seconds, removed, events = await _during(dsn, "messages", "message_events", removal)
    return _result("batched", removed, events, seconds, idle, during)


def _partitions_ddl(days: int) -> str:
    """One partition per old day for both tables, plus one for the recent month."""
    parts = []
    for table, parent in (("m", "messages_p"), ("e", "message_events_p")):
        for day in range(days + 1):
            start = f"date_trunc('day', now()) - interval '{40 + day} days'"
            parts.append(f"EXECUTE format('CREATE TABLE {table}_old_{day} PARTITION OF {parent} "
                         f"FOR VALUES FROM (%L) TO (%L)', {start}, {start} + interval '1 day');")
        parts.append(f"EXECUTE format('CREATE TABLE {table}_recent PARTITION OF {parent} "
                     "FOR VALUES FROM (%L) TO (%L)', date_trunc('day', now()) - "
                     "interval '39 days', now() + interval '30 days');")
    return "DO $$ BEGIN " + " ".join(parts) + " END $$;"


async def partitioned(server: EmbeddedPostgres, rows: int, days: int,
                      idle_seconds: float) -> LayoutResult:
    import asyncpg

    server.create_database("layout_partitioned")
    await asyncio.to_thread(upgrade, server.url("layout_partitioned"))
    dsn = server.dsn("layout_partitioned")
    await _seed(dsn, "messages_p", "message_events_p", rows, days,
                _PARTITIONED_DDL + _partitions_ddl(days))
    idle = await _idle(dsn, "messages_p", "message_events_p", idle_seconds)

    async def removal() -> tuple[int, int]:
        conn = await asyncpg.connect(dsn)
        messages = events = 0
        try:
            for day in range(days + 1):
                for table, parent in (("m", "messages_p"), ("e", "message_events_p")):
                    name = f"{table}_old_{day}"
                    count = await conn.fetchval(f"SELECT count(*) FROM {name}")
                    await conn.execute(f"ALTER TABLE {parent} DETACH PARTITION {name} "
                                       "CONCURRENTLY")
                    await conn.execute(f"DROP TABLE {name}")
                    if table == "m":
                        messages += count
                    else:
                        events += count
        finally:
            await conn.close()
        return messages, events

    during, seconds, removed, events = await _during(dsn, "messages_p", "message_events_p",
                                                     removal)
    return _result("partitioned", removed, events, seconds, idle, during)


def _result(layout: str, messages: int, events: int, seconds: float, idle: Latency,
            during: Latency) -> LayoutResult:
    return LayoutResult(layout, messages, events, round(seconds, 2),
                        round(messages / seconds) if seconds else 0,
                        round(events / seconds) if seconds else 0, idle, during)


def _table(results: list[LayoutResult]) -> str:
    lines = ["| layout | messages | events | seconds | messages/s | events/s | write p50 / p99 / "
             "max idle (ms) | write p50 / p99 / max during (ms) |", "|---" * 8 + "|"]
    for r in results:
        lines.append(
            f"| {r.layout} | {r.messages} | {r.events} | {r.seconds} | {r.messages_per_second}"
            f" | {r.events_per_second} | {r.idle.p50_ms} / {r.idle.p99_ms} / {r.idle.max_ms} |"
            f" {r.during.p50_ms} / {r.during.p99_ms} / {r.during.max_ms} |")
    return "\n".join(lines)


async def _measure(server: EmbeddedPostgres, args: argparse.Namespace) -> list[LayoutResult]:
    return [
        await batched(server, args.rows, args.days, args.batch_size, args.idle_seconds),
        await partitioned(server, args.rows, args.days, args.idle_seconds),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention_layouts",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=100_000, help="finished messages to remove")
    parser.add_argument("--days", type=int, default=5, help="days they are spread over")
    parser.add_argument("--batch-size", type=int, default=5000, help="batched: per transaction")
    parser.add_argument("--idle-seconds", type=float, default=3.0,
                        help="request-path latency measured this long before the removal")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="rms-retention-bench-"))
    server = EmbeddedPostgres(base / "data")
    try:
        server.start()
        results = asyncio.run(_measure(server, args))
    finally:
        server.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
    print(_table(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
