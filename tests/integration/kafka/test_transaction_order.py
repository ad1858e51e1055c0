"""A transaction whose second message's topic is missing on a cluster that does not create
topics: its one Kafka transaction is aborted, so none of its messages is published (the second
fails with topic-missing, the others with transaction-aborted); the recovery worker publishes
them in order once the topic exists, the third never overtaking the second."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import ConsumerRecord
from prometheus_client import REGISTRY

from recovery_service.runtime import from_context
from rms.kafka.records import header
from rms.kafka.topics import create_topics
from rms.worker import worker_context
from tests.integration.redelivery.helpers import events, message, tick_until
from tests.support import CHECK_PREFIX, Api, read_topic


def _failures(reason: str) -> float:
    return REGISTRY.get_sample_value("rms_publish_failures_total", {"reason": reason}) or 0.0


def published_at(history: list[dict[str, str]]) -> str:
    """When the first accepted publish of the message was recorded."""
    return next(e["at"] for e in history if e["event"] == "published")


def firsts(records: list[ConsumerRecord[bytes, bytes]]) -> list[ConsumerRecord[bytes, bytes]]:
    """The first record of each message (later ones are redeliveries: nobody acks here)."""
    seen: dict[str | None, ConsumerRecord[bytes, bytes]] = {}
    for record in records:
        seen.setdefault(header(list(record.headers), "rms-message-id"), record)
    return list(seen.values())


async def confirmed_then_crashed(api: Api, unique: str, topics: list[str]) -> list[str]:
    """A transaction of one message per topic (ack timeout 1 s) whose confirm commits in the
    database, then the confirming process "dies" before any publish; its message ids."""
    from rms.domain.models import Actor
    from rms.domain.transaction_transitions import CONFIRM
    from rms.store.database import create_engine
    from rms.store.transactions import TransactionStore

    orders = await api.create_app("orders")
    ids = [f"m{n}-{unique}" for n in range(len(topics))]
    body = {"transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
            "messages": [{"message_id": i, "topic": t, "payload": {"n": n},
                          "ack_timeout_seconds": 1.0}
                         for n, (i, t) in enumerate(zip(ids, topics, strict=True))]}
    assert (await api.post(orders, "/v1/transactions", json=body)).status_code == 201
    engine = create_engine(api.settings)
    try:
        _, changed = await TransactionStore(engine).change(
            f"tx-{unique}", CONFIRM, app="orders", actor="app:orders", by=Actor.PRODUCER)
    finally:
        await engine.dispose()
    assert changed
    return ids


@pytest.mark.timeout(120)
async def test_a_failed_publish_in_the_middle_holds_the_rest_in_order(
        strict_api: Api, unique: str) -> None:
    api = strict_api
    servers = api.settings.kafka_bootstrap_servers
    first, missing, third = f"orders.{unique}", f"billing.{unique}", f"audit.{unique}"
    await create_topics({"bootstrap_servers": servers}, [first, third])
    orders = await api.create_app("orders")
    ids = [f"m{n}-{unique}" for n in range(3)]
    body = {"transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
            "messages": [{"message_id": i, "topic": t, "payload": {"n": n}}
                         for n, (i, t) in enumerate(zip(ids, [first, missing, third],
                                                        strict=True))]}
    assert (await api.post(orders, "/v1/transactions", json=body)).status_code == 201

    missing_before = _failures("topic-missing")
    aborted_before = _failures("transaction-aborted")
    confirmed = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")

    assert confirmed.status_code == 200, confirmed.text
    # one broker failure aborts the one Kafka transaction of the three
    assert _failures("topic-missing") == missing_before + 1
    assert _failures("transaction-aborted") == aborted_before + 2
    assert _failures("held-for-order") == 0.0
    assert [m["state"] for m in confirmed.json()["messages"]] == ["sent"] * 3
    assert [(await message(api, i))["delivery_count"] for i in ids] == [0, 0, 0]
    reasons = [[e["detail"]["reason"] for e in await events(api, i)
                if e["event"] == "publish-failed"] for i in ids]
    assert reasons == [["transaction-aborted"], ["topic-missing"], ["transaction-aborted"]]
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    assert {(b["topic"], b["reason"]) for b in stats["publish_blocked"]} == {
        (first, "transaction-aborted"), (missing, "topic-missing"),
        (third, "transaction-aborted")}
    assert await read_topic(servers, first, expect=1, timeout=1.0) == []

    async with worker_context(api.settings, "recovery-worker") as context:
        worker = from_context(context)
        for _ in range(3):  # still missing: the second is retried, the third never overtakes
            await asyncio.sleep(0.6)  # past publish_retry_seconds: all are due
            await worker.tick()
        assert len(await read_topic(servers, first, expect=1, settle=0.3)) == 1
        retried = [e for e in await events(api, ids[1]) if e["event"] == "publish-failed"]
        assert len(retried) >= 3
        assert (await message(api, ids[2]))["delivery_count"] == 0
        assert [e["event"] for e in await events(api, ids[2])].count("publish-failed") == 1
        assert await read_topic(servers, third, expect=1, timeout=1.0) == []

        await create_topics({"bootstrap_servers": servers}, [missing])

        async def all_published() -> bool:
            return all([(await message(api, i))["delivery_count"] == 1 for i in ids])

        await tick_until(worker, all_published, timeout=30, interval=0.2)

    second_record = await read_topic(servers, missing, expect=1, settle=0.3)
    third_record = await read_topic(servers, third, expect=1, settle=0.3)
    assert [header(list(r.headers), "rms-message-id") for r in second_record] == [ids[1]]
    assert [header(list(r.headers), "rms-delivery") for r in third_record] == ["1"]
    assert second_record[0].timestamp <= third_record[0].timestamp
    assert published_at(await events(api, ids[1])) < published_at(await events(api, ids[2]))


@pytest.mark.timeout(120)
async def test_a_crash_between_confirm_and_publish_keeps_the_first_deliveries_in_order(
        api: Api, unique: str) -> None:
    """The API process stops right after the confirming statement, before any publish: the
    recovery worker publishes the messages once their ack deadline passed, one claim round
    each, in their order."""
    topics = [f"orders.{unique}", f"billing.{unique}", f"orders.{unique}"]
    ids = await confirmed_then_crashed(api, unique, topics)

    async with worker_context(api.settings, "recovery-worker") as context:
        worker = from_context(context)

        async def all_published() -> bool:
            return all([any(e["event"] == "published" for e in await events(api, i))
                        for i in ids])

        reports = await tick_until(worker, all_published, timeout=30, interval=0.2)

    # one first publish of the transaction per claim round: each waits for the one before
    assert [r.claimed for r in reports if r.claimed][:3] == [1, 1, 1]
    published = [published_at(await events(api, i)) for i in ids]
    assert published == sorted(published)
    servers = api.settings.kafka_bootstrap_servers
    first = firsts(await read_topic(servers, topics[0], expect=2, settle=0.3))
    second = firsts(await read_topic(servers, topics[1], expect=1, settle=0.3))
    assert [header(list(r.headers), "rms-message-id") for r in first] == [ids[0], ids[2]]
    assert first[0].timestamp <= second[0].timestamp <= first[1].timestamp
    # the reserved first delivery's outcome was unknown, so it stays counted: delivery 2
    assert {header(list(r.headers), "rms-delivery") for r in first + second} == {"2"}


@pytest.mark.timeout(120)
async def test_an_ordered_member_waits_for_an_earlier_member_whose_publish_failed(
        strict_api: Api, unique: str) -> None:
    """The sequencer's claim keeps a transaction's order as the recovery claim does: an
    ordered member is not published while an earlier member's publish keeps failing."""
    api = strict_api
    servers = api.settings.kafka_bootstrap_servers
    missing, ordered = f"billing.{unique}", f"ledger.{unique}"
    await create_topics({"bootstrap_servers": servers}, [ordered])
    orders = await api.create_app("orders", ordered=[ordered])
    ids = [f"m{n}-{unique}" for n in range(2)]
    body = {"transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
            "messages": [{"message_id": ids[0], "topic": missing, "payload": {"n": 0}},
                         {"message_id": ids[1], "topic": ordered, "key": "k",
                          "payload": {"n": 1}}]}
    assert (await api.post(orders, "/v1/transactions", json=body)).status_code == 201
    confirmed = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")
    assert confirmed.status_code == 200, confirmed.text

    async with worker_context(api.settings, "recovery-worker") as context:
        worker = from_context(context)
        for _ in range(3):  # the first member's topic is still missing
            await asyncio.sleep(0.6)
            await worker.tick()
        assert [(await message(api, i))["delivery_count"] for i in ids] == [0, 0]
        assert await read_topic(servers, ordered, expect=1, timeout=1.0) == []

        await create_topics({"bootstrap_servers": servers}, [missing])

        async def both_published() -> bool:
            return all([(await message(api, i))["delivery_count"] == 1 for i in ids])

        await tick_until(worker, both_published, timeout=30, interval=0.2)

    first = await read_topic(servers, missing, expect=1, settle=0.3)
    second = await read_topic(servers, ordered, expect=1, settle=0.3)
    assert first[0].timestamp <= second[0].timestamp
    assert published_at(await events(api, ids[0])) < published_at(await events(api, ids[1]))


@pytest.mark.timeout(120)
async def test_a_member_whose_publish_outcome_is_unknown_then_failed_still_holds_the_rest(
        strict_api: Api, unique: str) -> None:
    """The confirming process stops before any publish (the first delivery's outcome is
    unknown, so its number stays counted); the recovery worker's publish of the first message
    then fails (its topic is missing) and gives its own number back. ``delivery_count`` reads
    1, yet the broker never took the message: the second one must still wait for it."""
    api = strict_api
    servers = api.settings.kafka_bootstrap_servers
    missing, present = f"billing.{unique}", f"orders.{unique}"
    await create_topics({"bootstrap_servers": servers}, [present])
    ids = await confirmed_then_crashed(api, unique, [missing, present])

    async with worker_context(api.settings, "recovery-worker") as context:
        worker = from_context(context)

        async def first_failed() -> bool:
            return any(e["event"] == "publish-failed" for e in await events(api, ids[0]))

        await tick_until(worker, first_failed, timeout=30, interval=0.2)
        assert (await message(api, ids[0]))["delivery_count"] == 1
        for _ in range(4):  # the first is retried and fails again; the second never overtakes
            await asyncio.sleep(0.6)
            await worker.tick()
        assert not any(e["event"] == "published" for e in await events(api, ids[1]))
        assert await read_topic(servers, present, expect=1, timeout=1.0) == []

        await create_topics({"bootstrap_servers": servers}, [missing])

        async def all_published() -> bool:
            return all([any(e["event"] == "published" for e in await events(api, i))
                        for i in ids])

        await tick_until(worker, all_published, timeout=30, interval=0.2)

    assert published_at(await events(api, ids[0])) < published_at(await events(api, ids[1]))
