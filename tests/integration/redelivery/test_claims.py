"""The claim statements at store level: a limit is a limit, even when every row ties on the
sort key (the ``IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)`` shape can change more)."""

from __future__ import annotations

import asyncio

from rms.store.redelivery import RedeliveryStore
from tests.integration.redelivery.helpers import SqlHelper
from tests.support import Api


async def test_claim_and_exhaust_take_exactly_the_limit(api: Api, sql: SqlHelper,
                                                         topic: str) -> None:
    await api.create_app("orders")
    live = await sql.seed_sent("orders", topic, 30, prefix="live")
    spent = await sql.seed_sent("orders", topic, 30, prefix="spent")
    await sql.execute("UPDATE messages SET delivery_count = max_deliveries "
                      "WHERE message_id = ANY(:ids)", ids=spent)
    await sql.execute("UPDATE messages SET next_delivery_at = now() - interval '1 minute'")
    await sql.execute("UPDATE messages SET next_delivery_at = now() - interval '2 minutes' "
                      "WHERE message_id = ANY(:ids)", ids=spent)
    store = RedeliveryStore(sql.engine)
    found = await store.claim_round(limit=41, token="t1", lease_seconds=30, actor="test")
    assert (len(found.dead), len(found.claimed)) == (30, 11)  # oldest deadline first
    assert {m.message_id for m in found.dead} == set(spent)
    assert {m.message_id for m in found.claimed} <= set(live)
    assert all(m.delivery_count == 2 and m.claim_token == "t1" for m in found.claimed)
    assert all(m.dead_reason is not None and m.claim_token is None for m in found.dead)
    assert await sql.scalar("SELECT count(*) FROM messages WHERE claim_token = 't1'") == 11
    assert await sql.scalar("SELECT count(*) FROM messages WHERE dead") == 30
    assert await sql.scalar("SELECT count(*) FROM message_events WHERE event = 'dead'") == 30


async def test_concurrent_claims_never_share_a_message(api: Api, sql: SqlHelper,
                                                       topic: str) -> None:
    await api.create_app("orders")
    ids = await sql.seed_sent("orders", topic, 500)
    store = RedeliveryStore(sql.engine)

    async def claim_all(token: str) -> list[str]:
        taken: list[str] = []
        while True:
            found = await store.claim_round(limit=10, token=token, lease_seconds=30,
                                            actor=token)
            if not found.claimed:
                return taken
            taken += [m.message_id for m in found.claimed]

    results = await asyncio.gather(*(claim_all(f"w{n}") for n in range(5)))
    claimed = [message_id for taken in results for message_id in taken]
    assert sorted(claimed) == sorted(ids)  # each exactly once
