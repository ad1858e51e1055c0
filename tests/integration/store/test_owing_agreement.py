"""Who owes an ack, in every form that reads it: the store's SQL (``owing``, and the
per-consumer backlog that the stats and metrics show), the Python reading of a row
(``phase.awaiting``, the ``rms-awaiting`` header) and migration 0011's trigger (which refuses
to finish a message while someone owes it) agree on every combination of subscribers and acks
of three consumers, on real rows in PostgreSQL. (The Spark report's reading is checked
against a recomputation in tests/integration/spark/test_consumer_debts.py.)"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import AsyncIterator

import asyncpg
import orjson
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rms.devstack.embedded import EmbeddedPostgres
from rms.domain.phase import awaiting
from rms.store.rows import message_from
from rms.store.schema import messages
from rms.store.subscriptions.store import SubscriptionStore
from rms.store.subscriptions.terms import owing

CONSUMERS = ("invoices", "points", "shipping")
ACK = {"at": "2026-12-01T00:00:00.000000Z", "via": "http"}


def _cases() -> list[tuple[list[str] | None, list[str]]]:
    """Every set of subscribers (none: the single-ack rule) with every set of acks."""
    sets = [list(c) for n in range(len(CONSUMERS) + 1)
            for c in itertools.combinations(CONSUMERS, n)]
    return [(subscribers, acked) for subscribers in [None, *sets] for acked in sets]


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(database_url)
    yield engine
    await engine.dispose()


async def _store_cases(url: str) -> list[tuple[list[str] | None, list[str]]]:
    cases = _cases()
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(
            "INSERT INTO apps (name, api_key_hash, signing_secret) VALUES ('shop', 'h', 's')")
        for n, (subscribers, acked) in enumerate(cases):
            acks = orjson.dumps({name: ACK for name in acked}).decode() if acked else None
            await connection.execute(
                "INSERT INTO messages (message_id, app, topic, payload, state,"
                " check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries,"
                " confirmed_at, delivery_count, next_delivery_at, subscribers, acks)"
                " VALUES ($1, 'shop', 'orders.paid', '{}', 'sent', 10, 15, 60, 6, now(), 1,"
                " now(), $2, $3::jsonb)", f"m-{n:03}", subscribers, acks)
    finally:
        await connection.close()
    return cases


async def test_the_sql_the_python_and_the_trigger_agree_on_who_owes(
        postgres: EmbeddedPostgres, database_url: str, engine: AsyncEngine) -> None:
    dsn = postgres.dsn(database_url.rsplit("/", 1)[1])
    cases = await _store_cases(dsn)
    async with engine.connect() as conn:
        rows = (await conn.execute(select(messages, owing(messages).label("owing"))
                                   .order_by(messages.c.message_id))).all()
    assert len(rows) == len(cases)
    expected: Counter[str] = Counter()
    for row, (subscribers, acked) in zip(rows, cases, strict=True):
        in_python = awaiting(message_from(row._mapping))
        in_sql = tuple(row.owing) if row.owing is not None else None
        assert (in_sql or ()) == (in_python or ()), (subscribers, acked)
        assert in_python == (None if subscribers is None else
                             tuple(name for name in subscribers if name not in acked))
        expected.update(in_python or ())
    backlogs = await SubscriptionStore(engine).consumer_backlogs()
    assert {b.consumer: b.unacked for b in backlogs} == dict(expected)

    connection = await asyncpg.connect(dsn)
    try:
        for row, (subscribers, _acked) in zip(rows, cases, strict=True):
            owed = awaiting(message_from(row._mapping))
            finishing = connection.execute(
                "UPDATE messages SET state = 'done', done_at = now() WHERE message_id = $1",
                row.message_id)
            if owed:  # the trigger refuses to finish a message someone still owes
                with pytest.raises(asyncpg.CannotConnectNowError, match="not acked"):
                    await finishing
            else:
                assert await finishing == "UPDATE 1", subscribers
    finally:
        await connection.close()
