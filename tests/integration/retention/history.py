"""A history for the retention tests, stored straight into PostgreSQL: finished messages past
the cutoff (which must go), and everything that must stay (open, dead, recently finished)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pyarrow.parquet as pq

from history.dburl import asyncpg_dsn

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=40)  # finished long ago: past a 30-day retention
CUTOFF_AGE = timedelta(days=30)

_MESSAGE = """
INSERT INTO messages (message_id, app, topic, payload, headers, check_url, state, dead,
    dead_reason, check_count, delivery_count, check_after_seconds, max_checks,
    ack_timeout_seconds, max_deliveries, created_at, confirmed_at, done_at, deleted_at,
    next_check_at, next_delivery_at)
VALUES ($1, 'shop', 'orders.paid', $2::jsonb, '{"trace": "t"}'::jsonb, 'http://127.0.0.1/c',
    $3, $4, $5, 1, $6, 10, 15, 60, 6, $7, $8, $9, $10, $11, $12)
"""


@dataclass
class Seeded:
    """Which ids must go and which must stay."""

    doomed: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)


def _row(message_id: str, state: str, created: datetime, *, dead: bool = False
         ) -> tuple[Any, ...]:
    finished = created + timedelta(seconds=3)
    return (
        message_id, json.dumps({"id": message_id, "amount": 12.5}), state, dead,
        "delivery-exhausted" if dead else None, 1 if state != "pending-send" else 0, created,
        created + timedelta(seconds=1) if state in ("sent", "done") else None,
        finished if state == "done" else None, finished if state == "deleted" else None,
        created + timedelta(seconds=10) if state == "pending-send" else None,
        None if dead or state != "sent" else created + timedelta(seconds=60),
    )


def _events(message_id: str, state: str, created: datetime) -> list[tuple[Any, ...]]:
    names = {"pending-send": ["prepared"], "sent": ["prepared", "confirmed", "published"],
             "done": ["prepared", "confirmed", "published", "acked"],
             "deleted": ["prepared", "cancelled"]}[state]
    return [(message_id, created + timedelta(milliseconds=100 * i), name, "app:shop",
             json.dumps({"n": i, "name": name})) for i, name in enumerate(names)]


async def _seed(url: str, finished: int, days: int, prefix: str) -> Seeded:
    seeded = Seeded()
    rows: list[tuple[Any, ...]] = []
    events: list[tuple[Any, ...]] = []

    def add(message_id: str, state: str, created: datetime, doomed: bool,
            dead: bool = False) -> None:
        message_id = prefix + message_id
        rows.append(_row(message_id, state, created, dead=dead))
        events.extend(_events(message_id, state, created))
        (seeded.doomed if doomed else seeded.kept).add(message_id)

    for i in range(finished):  # spread over `days` days, done and deleted
        created = OLD - timedelta(days=i % days, seconds=i)
        add(f"old-{i:05d}", "done" if i % 3 else "deleted", created, doomed=True)
    for i in range(5):
        add(f"open-pending-{i}", "pending-send", OLD - timedelta(hours=i), doomed=False)
        add(f"open-sent-{i}", "sent", OLD - timedelta(hours=i), doomed=False)
        add(f"dead-{i}", "sent", OLD - timedelta(hours=i), doomed=False, dead=True)
        add(f"recent-{i}", "done", NOW - timedelta(days=1, hours=i), doomed=False)
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        async with conn.transaction():
            await conn.execute("INSERT INTO apps (name, api_key_hash, signing_secret) "
                               "VALUES ('shop', 'hash-shop', 's') ON CONFLICT DO NOTHING")
            await conn.executemany(_MESSAGE, rows)
            await conn.executemany(
                "INSERT INTO message_events (message_id, at, event, actor, detail) "
                "VALUES ($1, $2, $3, $4, $5::jsonb)", events)
    finally:
        await conn.close()
    return seeded


def seed(url: str, finished: int = 60, days: int = 3, prefix: str = "") -> Seeded:
    """``prefix`` starts every id (to seed more than once)."""
    return asyncio.run(_seed(url, finished, days, prefix))


async def _fetch(url: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return [dict(r) for r in await conn.fetch(sql, *args)]
    finally:
        await conn.close()


def fetch(url: str, sql: str, *args: Any) -> list[dict[str, Any]]:
    return asyncio.run(_fetch(url, sql, *args))


def stored_ids(url: str) -> set[str]:
    return {r["message_id"] for r in fetch(url, "SELECT message_id FROM messages")}


def stored_events(url: str, ids: set[str]) -> list[tuple[Any, ...]]:
    """(id, message_id, at, event, actor, detail as parsed JSON) of the messages' events."""
    rows = fetch(url, "SELECT id, message_id, at, event, actor, detail::text AS detail "
                 "FROM message_events WHERE message_id = ANY($1::text[])", sorted(ids))
    return sorted((r["id"], r["message_id"], r["at"], r["event"], r["actor"],
                   json.loads(r["detail"])) for r in rows)


def archived(archive: Path, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` in every day of the archive (files as a reader sees them)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(archive.glob(f"day=*/{table}/part-*.parquet")):
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def archived_events(archive: Path) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["message_id"], r["at"], r["event"], r["actor"],
                   json.loads(r["detail"])) for r in archived(archive, "events"))
