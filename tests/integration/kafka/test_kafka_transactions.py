"""A transaction's members due together are one Kafka transaction (design section 4,
"Transactions"), against a real broker: its batches are transactional and a commit marker
follows them in the broker's own log; a read_committed consumer sees all members or none;
a restarted instance fences its zombie and aborts the transaction it left open; two instances
never fence each other."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from prometheus_client import REGISTRY

from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.kafka.records import OutgoingRecord
from rms.kafka.topics import create_topics
from rms.kafka.transactional import TransactionalPublisher, atomic_publisher
from tests.integration.kafka.transactions_support import broker_batches, observing
from tests.integration.redelivery.helpers import events, message
from tests.support import CHECK_PREFIX, Api, read_topic


def _record(topic: str, value: bytes) -> OutgoingRecord:
    return OutgoingRecord(topic=topic, key=value, value=value, headers=[])


async def _one_producer(settings: Settings, kafka: EmbeddedKafka, name: str
                        ) -> tuple[str, str, Settings]:
    """A topic of one partition, the broker, and settings of an instance named ``name`` with
    one transactional producer."""
    topic = name.replace("-", ".", 1)
    await create_topics({"bootstrap_servers": kafka.bootstrap_servers}, [topic], partitions=1)
    return topic, kafka.bootstrap_servers, settings.model_copy(update={
        "instance_name": name, "kafka_transactional_producers": 1})


@pytest.mark.timeout(180)
async def test_a_confirm_publishes_its_members_in_one_committed_kafka_transaction(
        api: Api, kafka: EmbeddedKafka, unique: str) -> None:
    topics = [f"orders.{unique}", f"billing.{unique}"]
    await create_topics({"bootstrap_servers": kafka.bootstrap_servers}, topics, partitions=1)
    orders = await api.create_app("orders")
    ids = [f"m{n}-{unique}" for n in range(3)]
    body = {"transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
            "messages": [{"message_id": i, "topic": topics[n % 2], "payload": {"n": n}}
                         for n, i in enumerate(ids)]}
    assert (await api.post(orders, "/v1/transactions", json=body)).status_code == 201
    async with observing(kafka.bootstrap_servers, topics) as observer:
        confirmed = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")
        assert confirmed.status_code == 200, confirmed.text
        await observer.until("all three members read", lambda: len(observer.seen()) == 3, 15)
    assert sorted(observer.seen("1")) == sorted(ids)
    for message_id in ids:  # the bookkeeping of an accepted publish, per member
        assert (await message(api, message_id))["delivery_count"] == 1
        assert [e["event"] for e in await events(api, message_id)][-1] == "published"
    for topic in topics:  # the broker's own log: transactional batches, then a commit marker
        batches = broker_batches(kafka, topic)
        data = [b for b in batches if not b.control]
        assert data and all(b.transactional for b in data), batches
        assert batches[-1].control and batches[-1].marker == "COMMIT", batches


@pytest.mark.timeout(180)
async def test_a_restarted_instance_fences_its_zombie_and_aborts_what_it_left_open(
        settings: Settings, kafka: EmbeddedKafka, unique: str) -> None:
    """The zombie (a producer of the same transactional id that wrote a record and never
    committed) is fenced by the restarted instance's start: its commit is refused, its record
    is never shown to a read_committed consumer, and that consumer reads the restarted
    instance's transaction at once (long before the zombie's transaction would time out)."""
    topic = f"ledger.{unique}"
    servers = kafka.bootstrap_servers
    await create_topics({"bootstrap_servers": servers}, [topic], partitions=1)
    local = settings.model_copy(update={"instance_name": f"node-{unique}",
                                        "kafka_transactional_producers": 1})
    [tid] = [f"rms.node-{unique}.api.0"]
    zombie = AIOKafkaProducer(bootstrap_servers=servers, transactional_id=tid,
                              transaction_timeout_ms=600_000)
    await zombie.start()
    try:
        await zombie.begin_transaction()
        await zombie.send_and_wait(topic, b"zombie", key=b"zombie")
        async with atomic_publisher(local, "api") as restarted:
            assert restarted is not None and restarted.transactional_ids == [tid]
            with pytest.raises(KafkaError):
                await zombie.commit_transaction()
            result = await restarted.publish_atomically([_record(topic, b"restarted")])
        assert result.outcome == "committed"
    finally:
        await zombie.stop()
    uncommitted = await read_topic(servers, topic, expect=2)
    assert sorted(r.value for r in uncommitted) == [b"restarted", b"zombie"]
    committed = await read_topic(servers, topic, expect=1, timeout=20, settle=0.5,
                                 options={"isolation_level": "read_committed"})
    assert [r.value for r in committed] == [b"restarted"]


@pytest.mark.timeout(180)
async def test_two_instances_never_fence_each_other(
        settings: Settings, kafka: EmbeddedKafka, unique: str, tmp_path: Path) -> None:
    """Two processes' producers on one host without an instance name take two slots, so
    their ids differ, and their transactions interleave without fencing."""
    topic = f"ledger.{unique}"
    servers = kafka.bootstrap_servers
    await create_topics({"bootstrap_servers": servers}, [topic], partitions=2)
    local = settings.model_copy(update={"instance_slot_dir": str(tmp_path / "slots")})
    async with (atomic_publisher(local, "api") as first,
                atomic_publisher(local, "api") as second):
        assert first is not None and second is not None
        assert not set(first.transactional_ids) & set(second.transactional_ids)

        async def publish(publisher: TransactionalPublisher, name: str) -> list[str]:
            outcomes: list[str] = []
            for n in range(6):
                pair = [_record(topic, f"{name}-{n}-{part}".encode()) for part in "ab"]
                outcomes.append((await publisher.publish_atomically(pair)).outcome)
            return outcomes

        results = await asyncio.gather(publish(first, "one"), publish(second, "two"))
    assert list(results) == [["committed"] * 6] * 2
    committed = await read_topic(servers, topic, expect=24, settle=0.5,
                                 options={"isolation_level": "read_committed"})
    assert len(committed) == 24


@pytest.mark.timeout(180)
async def test_a_fenced_producer_is_replaced_and_its_members_aborted_not_an_error(
        settings: Settings, kafka: EmbeddedKafka, unique: str) -> None:
    """An instance's producer fenced by another of its transactional id turns fatal on its
    next send: the publish answers ``aborted`` (no exception), the producer is replaced, and
    the next publish commits with a new one."""
    topic, servers, local = await _one_producer(settings, kafka, f"fenced-{unique}")
    async with atomic_publisher(local, "api") as publisher:
        assert publisher is not None
        assert (await publisher.publish_atomically([_record(topic, b"one")])).outcome \
            == "committed"
        [tid] = publisher.transactional_ids
        fencer = AIOKafkaProducer(bootstrap_servers=servers, transactional_id=tid)
        await fencer.start()  # its InitProducerId fences the publisher's producer
        try:
            fenced = await publisher.publish_atomically([_record(topic, b"two"),
                                                         _record(topic, b"three")])
            assert fenced.outcome in {"aborted", "unknown"}, fenced
            again = await publisher.publish_atomically([_record(topic, b"four")])
        finally:
            await fencer.stop()
        assert again.outcome == "committed", again
    committed = await read_topic(servers, topic, expect=2, timeout=20, settle=0.5,
                                 options={"isolation_level": "read_committed"})
    assert [r.value for r in committed] == [b"one", b"four"]


@pytest.mark.timeout(180)
async def test_publishes_waiting_for_a_producer_share_its_next_kafka_transaction(
        settings: Settings, kafka: EmbeddedKafka, unique: str) -> None:
    """With one producer, the publishes that wait while it is busy go together in its next
    Kafka transaction: every one is committed and read whole, in fewer commits than
    publishes."""
    topic, servers, local = await _one_producer(settings, kafka, f"grouped-{unique}")
    transactions, records = _transaction_records()
    async with atomic_publisher(local, "api") as publisher:
        assert publisher is not None
        results = await asyncio.gather(*(
            publisher.publish_atomically([_record(topic, f"p{n}-{part}".encode())
                                          for part in "ab"])
            for n in range(20)))
    assert [r.outcome for r in results] == ["committed"] * 20
    transactions_after, records_after = _transaction_records()
    committed = await read_topic(servers, topic, expect=40, settle=0.5,
                                 options={"isolation_level": "read_committed"})
    values = [r.value.decode() for r in committed]
    assert sorted(values) == sorted(f"p{n}-{part}" for n in range(20) for part in "ab")
    for n in range(20):  # a publish's records stay together and in their order
        assert values.index(f"p{n}-b") == values.index(f"p{n}-a") + 1
    commits = [b for b in broker_batches(kafka, topic) if b.control and b.marker == "COMMIT"]
    assert 2 <= len(commits) < 20, commits
    # the histogram of records per Kafka transaction counts each commit and its 40 records
    assert (transactions_after - transactions, records_after - records) == (len(commits), 40)


def _transaction_records() -> tuple[float, float]:
    """The count and sum of ``rms_kafka_transaction_records`` so far."""
    count = REGISTRY.get_sample_value("rms_kafka_transaction_records_count") or 0.0
    return count, REGISTRY.get_sample_value("rms_kafka_transaction_records_sum") or 0.0


@pytest.mark.timeout(180)
async def test_a_refused_record_aborts_its_own_publish_and_the_others_commit_again_at_once(
        settings: Settings, kafka: EmbeddedKafka, unique: str) -> None:
    """Two publishes wait for the one producer together and share a Kafka transaction; the
    producer refuses one of them (a record over the request size): that one is aborted with
    its reason, the other is written again in one more transaction and committed."""
    topic, servers, local = await _one_producer(settings, kafka, f"refused-{unique}")
    async with atomic_publisher(local, "api") as publisher:
        assert publisher is not None
        first, refused, other = await asyncio.gather(
            publisher.publish_atomically([_record(topic, b"first")]),
            publisher.publish_atomically([_record(topic, b"small"),
                                          _record(topic, b"x" * 2_000_000)]),
            publisher.publish_atomically([_record(topic, b"other-a"), _record(topic, b"other-b")]))
    assert first.outcome == "committed" and other.outcome == "committed", (first, other)
    assert refused.outcome == "aborted"
    assert [f.reason if f else None for f in refused.failures] == \
        ["transaction-aborted", "too-large"], refused
    committed = await read_topic(servers, topic, expect=3, timeout=20, settle=0.5,
                                 options={"isolation_level": "read_committed"})
    assert [r.value for r in committed] == [b"first", b"other-a", b"other-b"]
    markers = [b.marker for b in broker_batches(kafka, topic) if b.control]
    assert markers == ["COMMIT", "ABORT", "COMMIT"], markers
