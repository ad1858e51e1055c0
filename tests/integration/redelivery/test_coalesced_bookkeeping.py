"""Publish bookkeeping through the Dispatcher's coalescing writer, against the database: one
statement for many outcomes, exact delivery counts, and a bad item that fails only itself."""

from __future__ import annotations

import asyncio

import pytest

from rms.domain.models import PublishOutcome
from rms.store.messages import MessageStore
from rms.store.redelivery import RedeliveryStore
from rms.usecases.redelivery import RedeliveryWorker
from tests.integration.redelivery.helpers import SqlHelper
from tests.support import Api


async def test_one_flush_records_accepted_and_failed_exactly(
        api: Api, worker: RedeliveryWorker, sql: SqlHelper, topic: str) -> None:
    await api.create_app("orders")
    ids = await sql.seed_sent("orders", topic, 6)
    found = await RedeliveryStore(sql.engine).claim_round(limit=10, token="t", lease_seconds=30,
                                                          actor="w")
    claimed = sorted(found.claimed, key=lambda m: m.message_id)
    assert [m.delivery_count for m in claimed] == [2] * 6  # number 2 reserved
    outcomes = [PublishOutcome(m.message_id, 2, ok=n % 2 == 0, error=None if n % 2 == 0
                               else "KafkaTimeoutError") for n, m in enumerate(claimed)]
    await worker.dispatcher.record(claimed, outcomes, actor="w", reschedule=True)
    rows = dict(await sql.rows("SELECT message_id, delivery_count FROM messages "
                               "WHERE message_id = ANY(:ids)", ids=ids))
    assert rows == {o.message_id: 2 if o.ok else 1 for o in outcomes}  # failed: given back
    assert await sql.scalar("SELECT count(*) FROM messages WHERE claim_token IS NOT NULL "
                            "AND message_id = ANY(:ids)", ids=ids) == 0
    events = await sql.rows("SELECT message_id, event, detail FROM message_events "
                            "WHERE message_id = ANY(:ids) ORDER BY id", ids=ids)
    assert sorted((m, e, d["delivery"]) for m, e, d in events) == sorted(
        (o.message_id, "published" if o.ok else "publish-failed", 2) for o in outcomes)


async def test_a_bad_item_in_a_coalesced_flush_fails_only_its_caller(
        api: Api, worker: RedeliveryWorker, sql: SqlHelper, topic: str) -> None:
    await api.create_app("orders")
    ids = await sql.seed_sent("orders", topic, 3, due=False)
    messages = await MessageStore(sql.engine).get_many(ids)
    dispatcher = worker.dispatcher

    async def record(message_id: str | None) -> None:
        base = messages[ids[0]]
        outcome = PublishOutcome(message_id, 1, ok=True)  # type: ignore[arg-type]
        await dispatcher.record([base], [outcome], actor="w", reschedule=False)

    good = [asyncio.create_task(record(message_id)) for message_id in ids]
    bad = asyncio.create_task(record(None))  # violates message_events.message_id NOT NULL
    await asyncio.gather(*good)
    with pytest.raises(Exception, match="not-null constraint"):
        await bad
    published = await sql.rows("SELECT message_id FROM message_events WHERE event = 'published' "
                               "AND message_id = ANY(:ids)", ids=ids)
    assert sorted(row[0] for row in published) == sorted(ids)  # each exactly once
