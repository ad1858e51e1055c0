"""Claims and leases against the real database: concurrent workers never share a message in a
round, an abandoned claim comes back after its lease, and a late worker changes nothing."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.domain.checkback import Action
from rms.store.checkback import Answer, CheckBackStore
from rms.store.database import create_engine
from tests.integration.checkback.helpers import (
    FAST,
    all_settled,
    drive,
    events,
    message,
    prepare_many,
    record_answer,
)
from tests.integration.checkback.servers import CallbackServer
from tests.support import Api, AppKeys


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(settings, pool_size=8)
    yield engine
    await engine.dispose()


async def test_concurrent_claims_never_overlap(api: Api, producer: AppKeys, server: CallbackServer,
                                               engine: AsyncEngine, topic: str) -> None:
    ids = await prepare_many(api, producer, topic, 600, server.url + "check",
                             check_after_seconds=0)
    claimed: Counter[str] = Counter()

    async def claimer(name: str) -> None:
        store = CheckBackStore(engine)
        while batch := (await store.claim(25, 60, name)).messages:
            claimed.update(m.message_id for m in batch)
            assert {m.check_count for m in batch} == {1}

    await asyncio.gather(*(claimer(f"w{n}") for n in range(6)))
    assert claimed == Counter(ids)


async def test_abandoned_claim_returns_and_a_late_worker_changes_nothing(
        api: Api, producer: AppKeys, server: CallbackServer, engine: AsyncEngine,
        topic: str) -> None:
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check", **FAST)
    await asyncio.sleep(0.1)
    store = CheckBackStore(engine)
    first = await store.claim(10, 1.0, "killed")  # this worker "dies" mid-batch
    assert [m.message_id for m in first.messages] == [message_id]
    assert (await store.claim(10, 1.0, "other")).messages == []  # leased: not due
    await asyncio.sleep(1.1)
    second = await store.claim(10, 30, "survivor")
    [again] = second.messages
    assert (again.message_id, again.check_count) == (message_id, 2)
    assert second.token != first.token

    late = await record_answer(engine, first.messages[0], first.token, "killed",
                               Action.CONFIRM, Answer(1, "committed"))
    assert late is None
    found = await message(api, producer, message_id)
    assert (found["state"], found["check_count"]) == ("pending-send", 2)
    cancelled = await record_answer(engine, again, second.token, "survivor", Action.CANCEL,
                                    Answer(2, "rolled_back"))
    assert cancelled is not None and cancelled.state.value == "deleted"
    history = [(e["event"], e["actor"], e["detail"])
               for e in await events(api, producer, message_id)][1:]
    assert history == [
        ("checked", "killed", {"attempt": 1, "outcome": "committed", "stale": True}),
        ("checked", "survivor", {"attempt": 2, "outcome": "rolled_back"}),
        ("cancelled", "survivor", {"by": "check-back"}),
    ]


async def test_due_with_no_attempt_left_is_dead_without_a_call(
        api: Api, producer: AppKeys, server: CallbackServer, engine: AsyncEngine,
        worker_settings: Settings, topic: str) -> None:
    """The worker that made the last call died before recording it: no extra call is made."""
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check",
                                       max_checks=1, **FAST)
    await asyncio.sleep(0.1)
    abandoned = await CheckBackStore(engine).claim(10, 0.2, "killed")
    assert len(abandoned.messages) == 1
    await asyncio.sleep(0.3)
    async with checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, [message_id]))
    assert server.calls == []
    found = await message(api, producer, message_id)
    assert (found["state"], found["dead"], found["dead_reason"], found["check_count"]) == (
        "pending-send", True, "check-exhausted", 1)
    assert found["next_check_at"] is None
    assert [(e["event"], e["detail"]) for e in await events(api, producer, message_id)] == [
        ("prepared", {}), ("dead", {"reason": "check-exhausted"})]


async def test_claim_scan_uses_the_due_index(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await conn.execute(text("SET enable_seqscan = off"))
        plan = "\n".join(row[0] for row in await conn.execute(text(
            "EXPLAIN SELECT message_id FROM messages WHERE state = 'pending-send' AND NOT dead "
            "AND next_check_at <= now() ORDER BY next_check_at LIMIT 200 "
            "FOR UPDATE SKIP LOCKED")))
    assert "messages_due_checks" in plan, plan


async def test_oldest_due_lag(api: Api, producer: AppKeys, server: CallbackServer,
                              engine: AsyncEngine, topic: str) -> None:
    store = CheckBackStore(engine)
    assert await store.oldest_due_lag() == 0.0
    await api.prepared_id(producer, topic, check_url=server.url + "check", check_after_seconds=0)
    await asyncio.sleep(0.3)
    lag = await store.oldest_due_lag()
    assert 0.25 <= lag < 5
    await store.claim(10, 30, "w")
    assert await store.oldest_due_lag() == 0.0
