"""The ack consumer tells an outage from a batch that keeps failing (design section 6): while
PostgreSQL cannot be reached the same batch is tried again for as long as that lasts and no
ack is lost; a batch that keeps failing while PostgreSQL answers is tried
``RMS_ACK_BATCH_MAX_TRIES`` times, then applied record by record, and what still fails is set
aside and counted, so the consumer commits past it. A real broker, real PostgreSQL (and a
real unreachable one), the real ack use case."""

from __future__ import annotations

import socket
from collections.abc import Sequence

from prometheus_client import REGISTRY

from rms.config import Settings
from rms.kafka.ack_consumer import AckConsumer
from rms.store.admin import AdminStore
from rms.store.apps import AppStore
from rms.store.database import create_engine
from rms.store.messages import MessageStore
from rms.store.subscriptions.store import SubscriptionStore
from rms.usecases.acks import Acks
from rms_client.ack_records import AckRecord
from tests.support import Api, AppKeys, eventually, produce


def _sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


async def _sent(api: Api, producer: AppKeys, topic: str) -> str:
    message_id = await api.prepared_id(producer, topic)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


async def _done(api: Api, owner: AppKeys, message_id: str) -> bool:
    response = await api.client.get(f"/v1/messages/{message_id}", headers=owner.headers)
    return bool(response.json()["state"] == "done")


def _own_topic(settings: Settings, name: str, tries: int = 2) -> Settings:
    """The settings of a second ack consumer on a topic of its own."""
    return settings.model_copy(update={"ack_topic": f"{settings.ack_topic}.{name}",
                                       "ack_consumer_group": f"group-{name}",
                                       "ack_batch_max_tries": tries})


async def test_a_batch_that_keeps_failing_is_applied_record_by_record(api: Api,
                                                                      topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    good, poisoned = await _sent(api, producer, topic), await _sent(api, producer, topic)
    local = _own_topic(api.settings, "poison")
    engine = create_engine(local)
    acks = Acks(local, MessageStore(engine), AppStore(engine), SubscriptionStore(engine))

    async def apply(records: Sequence[AckRecord]) -> int:
        """The use case, failing on every batch that holds ``poisoned`` (a fault in RMS, not
        in the record: the record itself is valid)."""
        if any(poisoned.encode() in (record.value or b"") for record in records):
            raise RuntimeError("a fault outside the records")
        return await acks.apply_records(records)

    consumer = AckConsumer(local, apply, AdminStore(engine).reachable)
    set_aside = _sample("rms_ack_batches_set_aside_total")
    unapplicable = _sample("rms_acks_rejected_total", {"reason": "unapplicable"})
    try:
        await produce(local.kafka_bootstrap_servers, local.ack_topic,
                      [await api.ack_body(producer, poisoned, "points"),
                       await api.ack_body(producer, good, "points")], points.signing_secret)
        consumer.start()
        await eventually(lambda: _done(api, producer, good), timeout=40)
        assert not await _done(api, producer, poisoned)
        assert _sample("rms_ack_batches_set_aside_total") >= set_aside + 1
        assert _sample("rms_acks_rejected_total", {"reason": "unapplicable"}) >= unapplicable + 1
    finally:
        await consumer.stop()
        await engine.dispose()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_an_unreachable_database_loses_no_ack_however_long(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await _sent(api, producer, topic)
    local = _own_topic(api.settings, "outage", tries=1)
    down = local.model_copy(update={"database_url": local.database_url.replace(
        local.database_url.split("@", 1)[1].split("/", 1)[0], f"127.0.0.1:{_closed_port()}")})
    broken, working = create_engine(down), create_engine(local)
    engines = [broken]  # the database the consumer reaches: the last one
    tries: list[int] = []

    async def apply(records: Sequence[AckRecord]) -> int:
        tries.append(len(records))
        engine = engines[-1]
        acks = Acks(local, MessageStore(engine), AppStore(engine), SubscriptionStore(engine))
        return await acks.apply_records(records)

    async def reachable() -> bool:
        return await AdminStore(engines[-1]).reachable()

    consumer = AckConsumer(local, apply, reachable)
    set_aside = _sample("rms_ack_batches_set_aside_total")
    try:
        value = await api.ack_body(producer, message_id, "points")
        await produce(local.kafka_bootstrap_servers, local.ack_topic, [value],
                      points.signing_secret)
        consumer.start()
        # several rounds against the unreachable database, the batch kept for each
        await eventually(lambda: _true(len(tries) >= 3), timeout=60)
        assert not await _done(api, producer, message_id)
        engines.append(working)  # PostgreSQL is back
        await eventually(lambda: _done(api, producer, message_id), timeout=30)
        assert _sample("rms_ack_batches_set_aside_total") == set_aside
    finally:
        await consumer.stop()
        await broken.dispose()
        await working.dispose()


async def _true(value: bool) -> bool:
    return value
