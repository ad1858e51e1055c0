"""Answers recorded many at a time (CheckBackStore.resolve_many, the worker's coalesced path):
each answer is still guarded by its own claim token, a stale worker's batch changes nothing,
and check counts stay exact."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.config import Settings
from rms.domain.checkback import Action
from rms.store.checkback import Answer, CheckBackStore, Claim, Resolution
from rms.store.database import create_engine
from tests.integration.checkback.helpers import FAST, events, message
from tests.integration.checkback.servers import CallbackServer
from tests.support import Api, AppKeys

ACTIONS = (Action.CONFIRM, Action.CANCEL, Action.RETRY, Action.EXHAUST)
OUTCOMES = {Action.CONFIRM: "committed", Action.CANCEL: "rolled_back",
            Action.RETRY: "unknown", Action.EXHAUST: "unknown"}


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(settings, pool_size=4)
    yield engine
    await engine.dispose()


def answers(claim: Claim, actor: str, actions: dict[str, Action]) -> list[Resolution]:
    return [Resolution(m.message_id, claim.token, actor, actions[m.message_id],
                       Answer(m.check_count, OUTCOMES[actions[m.message_id]]), 30.0)
            for m in claim.messages]


async def prepared(api: Api, producer: AppKeys, server: CallbackServer, topic: str,
                   count: int) -> list[str]:
    ids = [await api.prepared_id(producer, topic, check_url=server.url + "check", **FAST)
           for _ in range(count)]
    await asyncio.sleep(0.1)
    return ids


async def test_a_stale_workers_batch_changes_nothing(
        api: Api, producer: AppKeys, server: CallbackServer, engine: AsyncEngine,
        topic: str) -> None:
    ids = await prepared(api, producer, server, topic, 4)
    store = CheckBackStore(engine)
    stale = await store.claim(10, 0.3, "killed")
    await asyncio.sleep(0.4)  # its lease runs out; another worker claims the messages
    fresh = await store.claim(10, 30, "survivor")
    assert {m.message_id for m in fresh.messages} == set(ids)
    actions = dict(zip(ids, ACTIONS, strict=True))

    late = await store.resolve_many(answers(stale, "killed", actions))
    assert [r.applied for r in late] == [False] * 4
    for message_id in ids:
        found = await message(api, producer, message_id)
        assert (found["state"], found["dead"], found["check_count"]) == ("pending-send", False, 2)
        [checked] = [e for e in await events(api, producer, message_id) if e["actor"] == "killed"]
        assert checked["event"] == "checked" and checked["detail"]["stale"] is True

    applied = await store.resolve_many(answers(fresh, "survivor", actions))
    assert [r.applied for r in applied] == [True] * 4
    sent = {r.sent.message_id for r in applied if r.sent is not None}
    assert sent == {ids[0]}
    found = {m: await message(api, producer, m) for m in ids}
    assert [(found[m]["state"], found[m]["dead"]) for m in ids] == [
        ("sent", False), ("deleted", False), ("pending-send", False), ("pending-send", True)]
    assert [found[m]["check_count"] for m in ids] == [2, 2, 2, 2]
    assert found[ids[0]]["delivery_count"] == 1  # the confirm reserved the first delivery
    survivor = {m: [(e["event"], e["detail"]) for e in await events(api, producer, m)
                    if e["actor"] == "survivor"] for m in ids}
    checked = {"attempt": 2, "outcome": "committed"}
    # the confirm's reserved delivery is in the history after it, its publish still to come
    assert survivor[ids[0]] == [("checked", checked), ("confirmed", {"by": "check-back"}),
                                ("publishing", {"delivery": 1})]
    assert survivor[ids[1]] == [("checked", checked | {"outcome": "rolled_back"}),
                                ("cancelled", {"by": "check-back"})]
    assert survivor[ids[2]] == [("checked", checked | {"outcome": "unknown"})]
    assert survivor[ids[3]] == [("checked", checked | {"outcome": "unknown"}),
                                ("dead", {"reason": "check-exhausted"})]


async def test_one_batch_mixes_live_and_lost_claims(
        api: Api, producer: AppKeys, server: CallbackServer, engine: AsyncEngine,
        topic: str) -> None:
    """Each answer is guarded by its own token: a lost one in the same statement as live ones
    neither fails nor changes them."""
    lost_id, live_id = await prepared(api, producer, server, topic, 2)
    store = CheckBackStore(engine)
    first = await store.claim(10, 30, "w")
    lost = next(m for m in first.messages if m.message_id == lost_id)
    live = next(m for m in first.messages if m.message_id == live_id)
    stolen = Claim("someone-else", [lost], [])
    batch = [Resolution(lost_id, stolen.token, "w", Action.CONFIRM, Answer(1, "committed")),
             Resolution(live_id, first.token, "w", Action.CONFIRM, Answer(1, "committed"))]
    resolved = await store.resolve_many(batch)
    assert [r.applied for r in resolved] == [False, True]
    assert resolved[1].sent is not None and resolved[1].sent.message_id == live.message_id
    assert (await message(api, producer, lost_id))["state"] == "pending-send"
    assert (await message(api, producer, live_id))["state"] == "sent"


async def test_retries_count_every_call_and_exhaust_exactly_at_max_checks(
        api: Api, producer: AppKeys, server: CallbackServer, engine: AsyncEngine,
        topic: str) -> None:
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check",
                                       max_checks=3, **FAST)
    await asyncio.sleep(0.1)
    store = CheckBackStore(engine)
    for attempt in (1, 2, 3):
        claim = await store.claim(10, 30, "w")
        [claimed] = claim.messages
        assert claimed.check_count == attempt
        action = Action.EXHAUST if attempt == claimed.max_checks else Action.RETRY
        [done] = await store.resolve_many([Resolution(
            message_id, claim.token, "w", action, Answer(attempt, "unknown"), 0.0)])
        assert done.applied
    assert (await store.claim(10, 30, "w")).messages == []
    found = await message(api, producer, message_id)
    assert (found["state"], found["dead"], found["check_count"], found["next_check_at"]) == (
        "pending-send", True, 3, None)
    history = [(e["event"], e["detail"].get("attempt")) for e in await events(api, producer,
                                                                               message_id)]
    assert history == [("prepared", None), ("checked", 1), ("checked", 2), ("checked", 3),
                       ("dead", None)]
