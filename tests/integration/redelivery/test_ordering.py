"""Per-key ordering against real PostgreSQL and a real Kafka broker that creates no topic on
first use (as in production): the order is read back from the topic. Concurrent confirms from
many producers on few keys with two recovery workers, a first publish that fails (missing
topic, then created), a redelivery, and a dead letter that blocks its key until an operator
resolves it while other keys flow."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import orjson
import pytest
from aiokafka import ConsumerRecord
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from sqlalchemy.ext.asyncio import AsyncEngine

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.kafka.records import header
from rms.usecases.redelivery import RedeliveryWorker
from rms.worker import worker_context
from tests.integration.redelivery.helpers import SqlHelper, events, message, tick_until
from tests.support import CHECK_PREFIX, Api, AppKeys, read_topic

PARTITIONS = 4


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    """This module's broker creates no topic by itself: each test makes its own."""
    broker = EmbeddedKafka(tmp_path_factory.mktemp("ordering-kafka"), auto_create_topics=False)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"kafka_publish_timeout_seconds": 2.0})


async def _create_topic(api: Api, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=api.settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                            replication_factor=1)])
    finally:
        await admin.close()


async def _ordered_app(api: Api, name: str, topic: str, *prefixes: str) -> AppKeys:
    return await api.create_app(name, [topic], [topic], [CHECK_PREFIX, *prefixes],
                                ordered=[topic])


async def _confirmed(api: Api, app: AppKeys, topic: str, key: str, **fields: Any) -> str:
    message_id = await api.prepared_id(app, topic, key=key, **fields)
    response = await api.post(app, f"/v1/messages/{message_id}/confirm")
    assert response.status_code == 200, response.text
    body = response.json()
    # confirmed without the inline publish: sent, no delivery reserved, due at once
    assert (body["state"], body["ordered"], body["delivery_count"]) == ("sent", True, 0)
    return message_id


def _first_deliveries(records: Sequence[ConsumerRecord[bytes, bytes]]
                      ) -> dict[str, list[str]]:
    """Per record key, the message ids of first deliveries in topic order."""
    by_key: dict[str, list[str]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        headers = list(record.headers)
        if header(headers, "rms-delivery") == "1":
            assert record.key is not None
            by_key[record.key.decode()].append(header(headers, "rms-message-id") or "")
    return dict(by_key)


def _sequence(records: Sequence[ConsumerRecord[bytes, bytes]], key: str
              ) -> list[tuple[str, int]]:
    """``(message id, rms-delivery)`` of every record of ``key`` in topic order."""
    found = sorted((r for r in records if r.key == key.encode()),
                   key=lambda r: (r.partition, r.offset))
    return [(header(list(r.headers), "rms-message-id") or "",
             int(header(list(r.headers), "rms-delivery") or 0)) for r in found]


def _assert_confirm_order(ids: Sequence[str], confirmed: dict[str, tuple[float, float]]
                          ) -> None:
    """A message whose confirm was answered before another's was sent comes first."""
    position = {m: n for n, m in enumerate(ids)}
    for a in ids:
        for b in ids:
            if confirmed[a][1] < confirmed[b][0]:
                assert position[a] < position[b], (a, b)


def _assert_producer_order(records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
    """Each producer's own numbering rises along the topic (records of one key)."""
    seen: dict[int, int] = {}
    for record in sorted(records, key=lambda r: r.offset):
        value = orjson.loads(record.value or b"{}")
        assert value["i"] > seen.get(value["p"], -1)
        seen[value["p"]] = value["i"]


async def _blocked_keys(api: Api) -> list[dict[str, Any]]:
    response = await api.client.get("/v1/admin/stats", headers=api.admin)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["blocked_keys"]
    return found


async def _held_until_the_topic_exists(api: Api, worker: RedeliveryWorker, sql: SqlHelper,
                                       topic: str, first: str, second: str) -> None:
    """``second`` waits behind ``first`` (refused: its topic is missing) with no delivery of
    its own; once the topic is created both are published."""
    assert (await message(api, second))["delivery_count"] == 0
    assert await _blocked_keys(api) == [{"topic": topic, "key": "a", "app": "orders",
                                         "message_id": first, "reason": "publish-failed",
                                         "waiting": 1}]
    await _create_topic(api, topic)

    async def both_published() -> bool:
        return bool(await sql.scalar(
            "SELECT count(*) FROM messages WHERE delivery_count = 1") == 2)

    await tick_until(worker, both_published, timeout=60, interval=0.2)


@contextlib.asynccontextmanager
async def _running(workers: Sequence[RedeliveryWorker]) -> AsyncIterator[None]:
    """The workers tick in the background, as their schedulers would."""
    stop = asyncio.Event()

    async def loop(worker: RedeliveryWorker) -> None:
        while not stop.is_set():
            await worker.tick()
            await asyncio.sleep(0.02)

    tasks = [asyncio.create_task(loop(worker)) for worker in workers]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def test_ordered_topics_are_set_at_creation_and_changed_by_admin(api: Api,
                                                                       topic: str) -> None:
    orders = await api.create_app("orders", produce=[topic, "other.*"])
    assert (await api.client.get("/v1/admin/apps/orders", headers=api.admin)
            ).json()["ordered_topics"] == []
    unordered = await api.prepared_id(orders, topic, key="k")

    changed = await api.client.put("/v1/admin/apps/orders/ordered-topics",
                                   json={"ordered_topics": ["orders.*"]}, headers=api.admin)

    assert changed.status_code == 200, changed.text
    assert changed.json()["ordered_topics"] == ["orders.*"]
    keyed = await api.prepared_id(orders, topic, key="k")
    keyless = await api.prepared_id(orders, topic)
    elsewhere = await api.prepared_id(orders, "other.x", key="k")
    found = {m: (await message(api, m))["ordered"]
             for m in (unordered, keyed, keyless, elsewhere)}
    assert found == {unordered: False, keyed: True, keyless: False, elsewhere: False}
    missing = await api.client.put("/v1/admin/apps/nobody/ordered-topics",
                                   json={"ordered_topics": []}, headers=api.admin)
    assert missing.status_code == 404
    bad = await api.client.put("/v1/admin/apps/orders/ordered-topics",
                               json={"ordered_topics": "orders.*"}, headers=api.admin)
    assert bad.status_code == 422
    refused = await api.client.put("/v1/admin/apps/orders/ordered-topics",
                                   json={"ordered_topics": []}, headers=orders.headers)
    assert refused.status_code == 401


@pytest.mark.timeout(180)
async def test_concurrent_confirms_are_published_in_confirm_order_per_key(
        api: Api, worker: RedeliveryWorker, settings: Settings, topic: str,
        sql: SqlHelper) -> None:
    await _create_topic(api, topic)
    orders = await _ordered_app(api, "orders", topic)
    keys = ["k0", "k1", "k2"]
    confirmed: dict[str, tuple[float, float]] = {}  # message id: (confirm sent, answered)
    key_of: dict[str, str] = {}

    async def producer(p: int) -> None:
        for i in range(12):
            key = keys[(p + i) % len(keys)]
            message_id = await api.prepared_id(orders, topic, key=key, payload={"p": p, "i": i})
            sent = time.monotonic()
            response = await api.post(orders, f"/v1/messages/{message_id}/confirm")
            assert response.status_code == 200, response.text
            confirmed[message_id] = (sent, time.monotonic())
            key_of[message_id] = key

    async with (worker_context(settings, "recovery-worker") as second_context,
                _running([worker, from_context(second_context)])):
        await asyncio.gather(*(producer(p) for p in range(8)))

        async def all_published() -> bool:
            waiting = await sql.scalar("SELECT count(*) FROM messages WHERE delivery_count = 0")
            return bool(waiting == 0)

        deadline = time.monotonic() + 60
        while not await all_published():
            assert time.monotonic() < deadline, "not all ordered messages were published"
            await asyncio.sleep(0.1)

    records = await read_topic(settings.kafka_bootstrap_servers, topic, expect=96, settle=0.5)
    firsts = _first_deliveries(records)
    assert sorted(m for ids in firsts.values() for m in ids) == sorted(confirmed)  # once each
    for key, ids in firsts.items():
        assert all(key_of[m] == key for m in ids)
        assert len({r.partition for r in records if r.key == key.encode()}) == 1
        _assert_confirm_order(ids, confirmed)
        _assert_producer_order([r for r in records if r.key == key.encode()])
    assert await sql.scalar("SELECT count(*) FROM ordering_keys") == 0  # key leases released


@pytest.mark.timeout(180)
async def test_a_failed_first_publish_holds_back_its_key_until_the_topic_exists(
        api: Api, worker: RedeliveryWorker, topic: str, sql: SqlHelper) -> None:
    orders = await _ordered_app(api, "orders", topic)
    first = await _confirmed(api, orders, topic, "a")
    await worker.tick()  # the topic is missing: the first publish fails
    second = await _confirmed(api, orders, topic, "a")
    for _ in range(5):
        await worker.tick()
        await asyncio.sleep(0.1)

    assert [e["detail"]["reason"] for e in await events(api, first)
            if e["event"] == "publish-failed"][:1] == ["topic-missing"]
    assert [e["event"] for e in await events(api, second)] == ["prepared", "confirmed"]
    await _held_until_the_topic_exists(api, worker, sql, topic, first, second)
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2,
                               settle=0.5)
    assert _sequence(records, "a") == [(first, 1), (second, 1)]
    assert await _blocked_keys(api) == []


async def test_a_run_stopped_by_a_failed_publish_withdraws_the_rest_in_place(
        api: Api, worker: RedeliveryWorker, topic: str, sql: SqlHelper) -> None:
    """Two messages of a key claimed as one run, the first refused (topic missing): the
    second was reserved but never handed to the broker. Its number is given back and its
    ``publishing`` event stays where it was written, completed as ``withdrawn``."""
    orders = await _ordered_app(api, "orders", topic)
    first = await _confirmed(api, orders, topic, "a")
    second = await _confirmed(api, orders, topic, "a")
    await worker.tick()

    withdrawn = await events(api, second)
    assert [e["event"] for e in withdrawn] == ["prepared", "confirmed", "withdrawn"]
    assert withdrawn[-1]["detail"] == {"delivery": 1, "reason": "run-stopped"}
    assert [e["event"] for e in await events(api, first)][-1] == "publish-failed"
    await _held_until_the_topic_exists(api, worker, sql, topic, first, second)
    after = await events(api, second)
    assert after[:3] == withdrawn  # nothing written earlier moved or changed
    assert [(e["event"], e["detail"]["delivery"]) for e in after[3:]] == [("published", 1)]


@pytest.mark.timeout(180)
async def test_a_message_waiting_for_redelivery_holds_back_later_ones(
        api: Api, worker: RedeliveryWorker, topic: str, sql: SqlHelper) -> None:
    await _create_topic(api, topic)
    orders = await _ordered_app(api, "orders", topic)
    first = await _confirmed(api, orders, topic, "a", ack_timeout_seconds=60)
    await worker.tick()
    assert (await message(api, first))["delivery_count"] == 1
    # published and inside its ack deadline: it holds nothing back
    second = await _confirmed(api, orders, topic, "a")
    await worker.tick()
    assert (await message(api, second))["delivery_count"] == 1
    # its ack deadline passed: the later messages wait for its redelivery
    await sql.make_due([first])
    third = await _confirmed(api, orders, topic, "a")
    fourth = await _confirmed(api, orders, topic, "a")
    assert await _blocked_keys(api) == [{"topic": topic, "key": "a", "app": "orders",
                                         "message_id": first,
                                         "reason": "awaiting-redelivery", "waiting": 2}]

    async def all_published() -> bool:
        return bool(await sql.scalar(
            "SELECT count(*) FROM messages WHERE delivery_count >= 1") == 4)

    await tick_until(worker, all_published)
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=5,
                               settle=0.5)
    assert _sequence(records, "a") == [(first, 1), (second, 1), (first, 2), (third, 1),
                                       (fourth, 1)]


@pytest.mark.timeout(180)
async def test_a_dead_letter_blocks_its_key_until_resolved_while_other_keys_flow(
        api: Api, worker: RedeliveryWorker, topic: str, sql: SqlHelper) -> None:
    await _create_topic(api, topic)
    orders = await api.create_app("orders", [topic], ["none"], [CHECK_PREFIX], ordered=[topic])
    consumer = await api.create_app("points", produce=["none"], consume=[topic])
    dead_a = await _confirmed(api, orders, topic, "a", max_deliveries=1,
                              ack_timeout_seconds=0.2)
    dead_c = await _confirmed(api, orders, topic, "c", max_deliveries=1,
                              ack_timeout_seconds=0.2)
    await worker.tick()

    async def both_dead() -> bool:
        return bool(await sql.scalar("SELECT count(*) FROM messages WHERE dead") == 2)

    await tick_until(worker, both_dead)
    behind_a = await _confirmed(api, orders, topic, "a")
    behind_c = await _confirmed(api, orders, topic, "c")
    other = await _confirmed(api, orders, topic, "b")
    for _ in range(5):
        await worker.tick()
        await asyncio.sleep(0.1)

    assert (await message(api, other))["delivery_count"] == 1  # another key flows
    for held in (behind_a, behind_c):
        assert (await message(api, held))["delivery_count"] == 0
    assert await _blocked_keys(api) == [
        {"topic": topic, "key": key, "app": "orders", "message_id": dead, "reason": "dead",
         "waiting": 1} for key, dead in (("a", dead_a), ("c", dead_c))]

    # an operator resends the dead one: it goes first, then the one behind it
    resent = await api.client.post(f"/v1/admin/messages/{dead_a}/resend", headers=api.admin)
    assert resent.status_code == 200, resent.text
    assert (resent.json()["dead"], resent.json()["delivery_count"]) == (False, 1)
    # a late ack of the other dead one finishes it, and its key goes on
    acked = await api.post(consumer, f"/v1/messages/{dead_c}/ack")
    assert acked.json()["state"] == "done"

    resend_acked = False

    async def unblocked() -> bool:
        # the consumer acks the resent delivery once it is out; with one delivery and a 0.2 s
        # ack timeout it may already be dead again by then, and the late ack finishes it too
        nonlocal resend_acked
        if not resend_acked and (await message(api, dead_a))["delivery_count"] == 2:
            acked_resend = await api.post(consumer, f"/v1/messages/{dead_a}/ack")
            assert acked_resend.json()["state"] == "done", acked_resend.text
            resend_acked = True
        return resend_acked and bool(await sql.scalar(
            "SELECT count(*) FROM messages WHERE message_id = ANY(:ids) "
            "AND delivery_count = 1", ids=[behind_a, behind_c]) == 2)

    await tick_until(worker, unblocked)
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=6,
                               settle=0.5)
    assert _sequence(records, "a") == [(dead_a, 1), (dead_a, 2), (behind_a, 1)]
    resent_events = [e for e in await events(api, dead_a) if e["event"] == "resent"]
    assert [e["detail"] for e in resent_events] == [{"delivery": 2}]
    assert _sequence(records, "c") == [(dead_c, 1), (behind_c, 1)]
    assert _sequence(records, "b") == [(other, 1)]
    assert await _blocked_keys(api) == []


@pytest.mark.timeout(180)
async def test_every_confirm_path_leaves_the_publish_to_the_sequencer(
        api: Api, worker: RedeliveryWorker, settings: Settings, topic: str) -> None:
    from confirm_service.runtime import checkback_worker
    from tests.integration.checkback.servers import Call, Reply, callback_server

    await _create_topic(api, topic)

    async def committed(_call: Call) -> Reply:
        return Reply.answer("committed")

    async with callback_server() as server:
        server.behaviour = committed
        orders = await _ordered_app(api, "orders", topic, server.url)
        sent = await api.client.post("/v1/messages/send", headers=orders.headers, json={
            "topic": topic, "key": "a", "payload": {"n": 1},
            "check_url": CHECK_PREFIX + "check"})
        assert sent.status_code == 201, sent.text
        batch = [await api.prepared_id(orders, topic, key="a") for _ in range(2)]
        confirmed = await api.post(orders, "/v1/messages/batch/confirm",
                                   json={"message_ids": batch})
        assert confirmed.status_code == 200, confirmed.text
        by_admin = await api.prepared_id(orders, topic, key="a")
        admin = await api.client.post(f"/v1/admin/messages/{by_admin}/confirm",
                                      headers=api.admin)
        assert admin.status_code == 200, admin.text
        checked = await api.prepared_id(orders, topic, key="a", check_after_seconds=0.1,
                                        check_url=server.url + "check")
        await asyncio.sleep(0.3)
        async with checkback_worker(settings) as checker:
            await tick_until_checked(checker, api, checked)
        ids = [sent.json()["message_id"], *batch, by_admin, checked]
        for message_id in ids:
            stored = await message(api, message_id)
            assert (stored["state"], stored["delivery_count"]) == ("sent", 0), message_id

        async def all_published() -> bool:
            return all([(await message(api, m))["delivery_count"] == 1 for m in ids])

        await tick_until(worker, all_published)
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=5,
                               settle=0.5)
    assert _sequence(records, "a") == [(m, 1) for m in ids]


async def tick_until_checked(checker: Any, api: Api, message_id: str) -> None:
    deadline = time.monotonic() + 20
    while (await message(api, message_id))["state"] != "sent":
        assert time.monotonic() < deadline, "the check-back never confirmed"
        await checker.tick()
        await asyncio.sleep(0.1)


async def test_a_key_is_leased_to_one_worker_until_released_or_expired(
        api: Api, engine: AsyncEngine, topic: str, sql: SqlHelper) -> None:
    from rms.store.ordering import Key, OrderingStore

    orders = await _ordered_app(api, "orders", topic)
    first = await _confirmed(api, orders, topic, "a")
    store = OrderingStore(engine)

    held = await store.lease_keys(limit=10, token="worker-a", lease_seconds=30)
    assert held == [Key("orders", topic, "a")]
    assert await store.lease_keys(limit=10, token="worker-b", lease_seconds=30) == []
    # a claim under another worker's token takes nothing of the key
    other = await store.claim_run([first], key_token="worker-b", token="claim-b",
                                  lease_seconds=30, actor="worker-b")
    assert (other.claimed, other.dead) == ([], [])
    # once the lease ran out, another worker may take the key, and the first one's claims fail
    await sql.execute("UPDATE ordering_keys SET lease_until = now() - interval '1 second'")
    assert await store.lease_keys(limit=10, token="worker-b", lease_seconds=30) == held
    late = await store.claim_run([first], key_token="worker-a", token="claim-a",
                                 lease_seconds=30, actor="worker-a")
    assert late.claimed == []
    taken = await store.claim_run([first], key_token="worker-b", token="claim-b",
                                  lease_seconds=30, actor="worker-b")
    assert [m.message_id for m in taken.claimed] == [first]
    await store.release("worker-b")
    assert await sql.scalar("SELECT count(*) FROM ordering_keys") == 0
