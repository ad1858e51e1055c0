"""The history reads as it happened with a consumer that acknowledges at once: it reads each
record from Kafka and acks it over HTTP right away, often before the publisher has recorded
the broker's answer. Every message's events read prepared, confirmed, published, acked, and
the ``published`` time is not later than the ``acked`` one (the SLA report's
publish-to-done stage never goes negative). Real broker, real PostgreSQL, the API in
process."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from aiokafka import AIOKafkaConsumer

from rms.kafka.records import header
from tests.integration.redelivery.helpers import events
from tests.support import Api, AppKeys, create_topic

MESSAGES = 60


async def _ack_at_once(api: Api, consumer_app: AppKeys, consumer: AIOKafkaConsumer,
                       expected: int) -> None:
    """Ack every record as soon as it is read, until ``expected`` were acked."""
    acked = 0
    while acked < expected:
        batch = await consumer.getmany(timeout_ms=100)
        for record in (r for part in batch.values() for r in part):
            message_id = header(list(record.headers), "rms-message-id")
            response = await api.post(consumer_app, f"/v1/messages/{message_id}/ack")
            assert response.status_code == 200, response.text
            acked += 1


@pytest.mark.timeout(180)
async def test_a_consumer_acking_at_once_reads_published_before_acked(api: Api,
                                                                       topic: str) -> None:
    bootstrap = api.settings.kafka_bootstrap_servers
    await create_topic(bootstrap, topic)
    orders = await api.create_app("orders", produce=[topic], consume=["none"])
    points = await api.create_app("points", consume=[topic])
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                fetch_max_wait_ms=5)
    await consumer.start()
    try:
        acking = asyncio.create_task(_ack_at_once(api, points, consumer, MESSAGES))
        ids = [await api.prepared_id(orders, topic, payload={"n": n}) for n in range(MESSAGES)]
        confirms = await asyncio.gather(*(api.post(orders, f"/v1/messages/{i}/confirm")
                                          for i in ids))
        assert all(r.status_code == 200 for r in confirms)
        await asyncio.wait_for(acking, 60)
    finally:
        await consumer.stop()

    wrong = {}
    for message_id in ids:
        history = await events(api, message_id)
        names = [e["event"] for e in history]
        at = {e["event"]: datetime.fromisoformat(e["at"].replace("Z", "+00:00"))
              for e in history}
        if names != ["prepared", "confirmed", "published", "acked"] \
                or at["published"] > at["acked"]:
            wrong[message_id] = [(e["event"], e["at"]) for e in history]
    assert wrong == {}
