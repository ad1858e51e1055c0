"""The settle of a history whose ``published`` event was recorded after an ack (the publisher
records the broker's answer after the consumer already acked), on real PostgreSQL: each early
ack is numbered right after the ``published`` event it follows in truth, and nothing else
moves. With several subscribers an ack of one of them followed by a redelivery to another is
in its place and stays there."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from rms.config import Settings
from rms.store.database import create_engine
from rms.store.dburl import parse_database_url
from rms.store.dispatch import DispatchStore

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

# message -> its events as written: (event, actor, done) in id order, then the order expected
CASES: dict[str, tuple[list[tuple[str, str | None, bool | None]], list[str]]] = {
    "final-ack-first": ([("confirmed", None, None), ("acked", "a", True),
                         ("published", None, None)],
                        ["confirmed", "published", "acked:a"]),
    "two-acks-first": ([("confirmed", None, None), ("acked", "a", False), ("acked", "b", True),
                        ("published", None, None)],
                       ["confirmed", "published", "acked:a", "acked:b"]),
    "partial-ack-then-redelivery": ([("confirmed", None, None), ("published", None, None),
                                     ("acked", "a", False), ("published", None, None)],
                                    ["confirmed", "published", "acked:a", "published"]),
    "final-ack-before-the-redelivery-record": (
        [("confirmed", None, None), ("published", None, None), ("acked", "a", False),
         ("acked", "b", True), ("published", None, None)],
        ["confirmed", "published", "acked:a", "published", "acked:b"]),
    "partial-ack-before-any-publish": (
        [("confirmed", None, None), ("acked", "a", False), ("published", None, None),
         ("published", None, None), ("acked", "b", True)],
        ["confirmed", "published", "acked:a", "published", "acked:b"]),
    "single-ack-rule-without-done": ([("confirmed", None, None), ("acked", "a", None),
                                      ("published", None, None)],
                                     ["confirmed", "published", "acked:a"]),
}


async def _write(conn: asyncpg.Connection) -> None:
    await conn.execute("INSERT INTO apps (name, api_key_hash, signing_secret) "
                       "VALUES ('shop', 'hash-shop', 's')")
    for message_id, (events, _) in CASES.items():
        await conn.execute(
            "INSERT INTO messages (message_id, app, topic, payload, check_url, state, "
            "check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, "
            "created_at, confirmed_at) VALUES ($1, 'shop', 'orders', '{}'::jsonb, "
            "'http://127.0.0.1/check', 'sent', 10, 15, 60, 6, $2, $2)", message_id, T0)
        for n, (event, actor, done) in enumerate(events):
            detail = {} if done is None else {"via": "http", "done": done}
            # written in this order, each a second later than the one before
            await conn.execute(
                "INSERT INTO message_events (message_id, at, event, actor, detail) "
                "VALUES ($1, $2, $3, $4, $5::jsonb)", message_id, T0 + timedelta(seconds=n),
                event, f"app:{actor}" if actor else "app:shop", json.dumps(detail))


async def _order(conn: asyncpg.Connection, message_id: str) -> list[tuple[str, datetime]]:
    rows = await conn.fetch("SELECT event, actor, at FROM message_events WHERE message_id = $1 "
                            "ORDER BY id", message_id)
    return [(r["event"] + (":" + r["actor"][4:] if r["event"] == "acked" else ""), r["at"])
            for r in rows]


@pytest.mark.timeout(60)
async def test_each_early_ack_follows_the_publish_it_came_after(settings: Settings) -> None:
    dsn = parse_database_url(settings.database_url).dsn()
    conn = await asyncpg.connect(dsn)
    engine = create_engine(settings)
    try:
        await _write(conn)
        await DispatchStore(engine).settle(sorted(CASES))
        for message_id, (_, expected) in CASES.items():
            order = await _order(conn, message_id)
            assert [name for name, _ in order] == expected, message_id
            for n, (name, at) in enumerate(order):  # a publish no later than an ack after it
                if name == "published":
                    assert all(at <= later for later_name, later in order[n + 1:]
                               if later_name.startswith("acked")), (message_id, order)
        untouched = await _order(conn, "partial-ack-then-redelivery")
        assert [at for _, at in untouched] == [T0 + timedelta(seconds=n) for n in range(4)]
    finally:
        await engine.dispose()
        await conn.close()
