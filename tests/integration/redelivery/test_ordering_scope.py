"""Per-key ordering where it meets transactions, delays and other apps, against real
PostgreSQL and Kafka (the order is read back from the topic): an ordered member of a
transaction never overtakes an earlier member, a transaction's ordered members are numbered in
their listed order, a key belongs to one app, and a delayed head holds its key (listed as
``scheduled``)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import ConsumerRecord

from rms.kafka.records import header
from rms.usecases.redelivery import RedeliveryWorker
from tests.integration.redelivery.helpers import SqlHelper, events, message, tick_until
from tests.support import CHECK_PREFIX, Api, AppKeys, read_topic


async def _confirmed(api: Api, app: AppKeys, topic: str, key: str, **fields: Any) -> str:
    message_id = await api.prepared_id(app, topic, key=key, **fields)
    response = await api.post(app, f"/v1/messages/{message_id}/confirm")
    assert response.status_code == 200, response.text
    return message_id


async def _blocked_keys(api: Api) -> list[dict[str, Any]]:
    response = await api.client.get("/v1/admin/stats", headers=api.admin)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["blocked_keys"]
    return found


def _first_published(history: list[dict[str, Any]]) -> str:
    return str(next(e["at"] for e in history if e["event"] == "published"))


def _ids(records: list[ConsumerRecord[bytes, bytes]]) -> list[str | None]:
    return [header(list(r.headers), "rms-message-id")
            for r in sorted(records, key=lambda r: (r.partition, r.offset))]


async def test_an_ordered_member_waits_for_a_delayed_earlier_member(
        api: Api, worker: RedeliveryWorker, sql: SqlHelper, unique: str) -> None:
    plain, ordered = f"plain.{unique}", f"ordered.{unique}"
    orders = await api.create_app("orders", ordered=[ordered])
    ids = [f"{n}-{unique}" for n in ("a", "b", "c")]
    body = {"transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
            "messages": [
                {"message_id": ids[0], "topic": plain, "payload": {"n": 0}, "delay_seconds": 600},
                {"message_id": ids[1], "topic": ordered, "key": "k", "payload": {"n": 1}},
                {"message_id": ids[2], "topic": plain, "payload": {"n": 2}}]}
    assert (await api.post(orders, "/v1/transactions", json=body)).status_code == 201
    confirmed = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    later = await _confirmed(api, orders, ordered, "k")  # the same key, behind the member

    for _ in range(4):  # while the first member waits: neither the ordered one nor its key goes
        await worker.tick()
        await asyncio.sleep(0.1)
    assert [(await message(api, i))["delivery_count"] for i in ids] == [0, 0, 0]
    assert (await message(api, later))["delivery_count"] == 0
    assert await _blocked_keys(api) == [{"topic": ordered, "key": "k", "app": "orders",
                                         "message_id": ids[1], "reason": "held-for-order",
                                         "waiting": 1}]

    # the delay ends: the members go in their order, then the key's later message
    await sql.execute("UPDATE messages SET deliver_after = now(), next_delivery_at = now() "
                      "WHERE message_id = :m", m=ids[0])

    async def all_published() -> bool:
        return all([(await message(api, i))["delivery_count"] >= 1 for i in [*ids, later]])

    await tick_until(worker, all_published, timeout=30, interval=0.2)
    published = [_first_published(await events(api, i)) for i in ids]
    assert published == sorted(published)
    servers = api.settings.kafka_bootstrap_servers
    first = await read_topic(servers, plain, expect=2, settle=0.3)
    second = await read_topic(servers, ordered, expect=2, settle=0.3)
    assert _ids(first) == [ids[0], ids[2]]
    assert _ids(second) == [ids[1], later]
    assert first[0].timestamp <= second[0].timestamp <= max(r.timestamp for r in first)


async def test_a_transactions_ordered_members_are_numbered_in_listed_order(
        api: Api, sql: SqlHelper, unique: str) -> None:
    """Whatever way the database visits the rows (here a plain table scan, forced), the
    confirm numbers the ordered members in their listed order."""
    from sqlalchemy import text

    from rms.domain.models import Actor
    from rms.domain.transaction_transitions import CONFIRM
    from rms.store.database import open_engine
    from rms.store.transactions import TransactionStore

    ordered = f"ordered.{unique}"
    orders = await api.create_app("orders", ordered=[ordered])
    ids = [f"{n}-{unique}" for n in range(4)]
    body = {"transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
            "messages": [{"message_id": i, "topic": ordered, "key": "k", "payload": {"n": n}}
                         for n, i in enumerate(ids)]}
    assert (await api.post(orders, "/v1/transactions", json=body)).status_code == 201
    # rewriting the first members puts their current versions after the others in the table
    await sql.execute("UPDATE messages SET headers = headers WHERE message_id = ANY(:ids)",
                      ids=ids[:2])
    engine = open_engine(api.settings.database_url, connect_args={
        "server_settings": {"enable_indexscan": "off", "enable_bitmapscan": "off"}})
    try:
        async with engine.connect() as conn:
            scanned = (await conn.execute(text(
                "SELECT message_id FROM messages WHERE transaction_id = :t"),
                {"t": f"tx-{unique}"})).scalars().all()
        assert list(scanned) != ids  # the table order is not the listed order
        _, changed = await TransactionStore(engine).change(
            f"tx-{unique}", CONFIRM, app="orders", actor="app:orders", by=Actor.PRODUCER)
    finally:
        await engine.dispose()

    assert changed
    numbered = await sql.rows("SELECT message_id FROM messages WHERE transaction_id = :t "
                              "ORDER BY confirm_seq", t=f"tx-{unique}")
    assert [r.message_id for r in numbered] == ids


async def test_a_key_belongs_to_its_app_and_a_delayed_head_holds_it_as_scheduled(
        api: Api, worker: RedeliveryWorker, sql: SqlHelper, unique: str) -> None:
    ordered = f"ordered.{unique}"
    billing = await api.create_app("billing", ordered=[ordered])
    orders = await api.create_app("orders", ordered=[ordered])
    dead = await _confirmed(api, billing, ordered, "shared")
    await sql.make_dead([dead])
    delayed = await _confirmed(api, billing, ordered, "k", delay_seconds=600)
    behind = await _confirmed(api, billing, ordered, "k")
    mine = [await _confirmed(api, orders, ordered, "shared"),
            await _confirmed(api, orders, ordered, "k")]

    async def mine_published() -> bool:
        return all([(await message(api, m))["delivery_count"] == 1 for m in mine])

    await tick_until(worker, mine_published, timeout=20, interval=0.1)
    # billing's dead and delayed heads hold billing's keys only
    assert (await message(api, behind))["delivery_count"] == 0
    assert (await message(api, delayed))["delivery_count"] == 0
    assert await _blocked_keys(api) == [
        {"topic": ordered, "key": "k", "app": "billing", "message_id": delayed,
         "reason": "scheduled", "waiting": 1},
        {"topic": ordered, "key": "shared", "app": "billing", "message_id": dead,
         "reason": "dead", "waiting": 0}]
    records = await read_topic(api.settings.kafka_bootstrap_servers, ordered, expect=2,
                               settle=0.3)
    assert sorted(_ids(records), key=str) == sorted(mine)

    # the delay ends: the delayed head goes first, then the one behind it
    await sql.execute("UPDATE messages SET deliver_after = now(), next_delivery_at = now() "
                      "WHERE message_id = :m", m=delayed)

    async def billing_published() -> bool:
        return bool((await message(api, behind))["delivery_count"] == 1)

    await tick_until(worker, billing_published, timeout=20, interval=0.1)
    records = await read_topic(api.settings.kafka_bootstrap_servers, ordered, expect=4,
                               settle=0.3)
    assert [m for m in _ids(records) if m in (delayed, behind)] == [delayed, behind]
