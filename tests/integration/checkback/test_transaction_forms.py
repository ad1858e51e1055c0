"""The one change of a transaction written in two forms: flagging a transaction and its
messages dead when its check-back is exhausted, by the claim (a due transaction with no call
left, Core) and by the answer to its last call (the answers statement, text). Both write the
same rows, column by column, and the same events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import transaction_transitions as ledger
from rms.store.database import open_engine
from rms.store.schema import message_events, messages, transactions
from rms.store.transactions import AnswerItem, TransactionStore
from tests.integration.api.test_transactions import body, create
from tests.support import Api

ACTOR = "checkback-test"
# what differs between two rows by nature: their ids, times and the claim that touched them
_OWN = {"transaction_id", "message_id", "message_ids", "created_at", "next_check_at",
        "claim_token", "check_count", "confirmed_at", "topic", "payload", "transaction_position"}


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = open_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()


async def _rows(engine: AsyncEngine, transaction_id: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        row = (await conn.execute(select(transactions).where(
            transactions.c.transaction_id == transaction_id))).one()
        members = (await conn.execute(select(messages).where(
            messages.c.transaction_id == transaction_id)
            .order_by(messages.c.transaction_position))).all()
        events = (await conn.execute(
            select(message_events.c.event, message_events.c.actor, message_events.c.detail)
            .join(messages, messages.c.message_id == message_events.c.message_id)
            .where(messages.c.transaction_id == transaction_id, message_events.c.event == "dead")
            .order_by(message_events.c.id))).all()

    def kept(mapping: Any) -> dict[str, Any]:
        return {k: v for k, v in dict(mapping).items() if k not in _OWN}

    return {"transaction": kept(row._mapping),
            "messages": [kept(m._mapping) for m in members],
            "dead_events": [(e.event, e.actor, {k: v for k, v in e.detail.items()
                                                 if k != "transaction_id"}) for e in events]}


async def test_flagged_dead_by_the_claim_and_by_the_answer_alike(
        api: Api, engine: AsyncEngine, unique: str) -> None:
    orders = await api.create_app("orders")
    topics = [f"orders.{unique}", f"orders.{unique}"]
    for name in ("by-claim", "by-answer"):
        await create(api, orders, body(topics, f"{name}-{unique}", max_checks=1,
                                       check_after_seconds=0))
    store = TransactionStore(engine)
    first = await store.claim(10, 0.0, ACTOR)  # both called once, the lease ends at once
    assert {v.transaction.transaction_id for v in first.claimed} == {
        f"by-claim-{unique}", f"by-answer-{unique}"}
    [answered] = await store.answer_many([AnswerItem(
        f"by-answer-{unique}", first.token, ledger.CHECK_EXHAUSTED, ACTOR,
        {"attempt": 1, "outcome": "unknown"})])
    assert answered is not None and answered.transaction.dead
    second = await store.claim(10, 0.0, ACTOR)  # the other: due with no call left
    assert [v.transaction.transaction_id for v in second.exhausted] == [f"by-claim-{unique}"]

    by_claim, by_answer = (await _rows(engine, f"by-claim-{unique}"),
                           await _rows(engine, f"by-answer-{unique}"))
    assert by_claim["transaction"]["dead_reason"] == "check-exhausted"
    assert [m["dead"] for m in by_claim["messages"]] == [True, True]
    assert len(by_claim["dead_events"]) == 2
    assert by_claim == by_answer
