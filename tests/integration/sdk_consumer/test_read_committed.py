"""The Python consumer reads read_committed by default: a record of an aborted Kafka
transaction (a publish its process never committed) is never handed to the handler, and a
committed record behind it is."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from sqlalchemy.ext.asyncio import AsyncEngine

from rms_client.consumer import BatchReport, HttpAcker, Outcome, RmsConsumer
from tests.integration.sdk_consumer.helpers import consume_until, copy_record, record_effect
from tests.support import Api, read_topic


async def test_a_record_of_an_aborted_kafka_transaction_is_never_handled(
        api: Api, consumer_db: AsyncEngine, topic: str, unique: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points2", produce=["none"], consume=["orders.*"])
    message_id = await api.prepared_id(producer, topic)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    servers = api.settings.kafka_bootstrap_servers
    (published,) = await read_topic(servers, topic, expect=1)
    aborting = AIOKafkaProducer(bootstrap_servers=servers, transactional_id=f"abort-{unique}")
    await aborting.start()
    try:
        await aborting.begin_transaction()
        headers = [(k, v) for k, v in published.headers if k != "rms-message-id"]
        await aborting.send_and_wait(topic, published.value, key=published.key,
                                     headers=[*headers, ("rms-message-id", b"m-aborted")])
        await aborting.abort_transaction()
    finally:
        await aborting.stop()
    await copy_record(servers, published, 2)  # committed, after the aborted one
    consumer = RmsConsumer(app="points2", engine=consumer_db, handler=record_effect,
                           acker=HttpAcker(client=api.client, api_key=points.api_key),
                           bootstrap_servers=servers, group_id="points2", topics=[topic])

    async def both_seen(reports: list[BatchReport]) -> bool:
        return sum(len(r.outcomes) + r.skipped for r in reports) >= 2

    async with consumer:
        reports = await consume_until(consumer, both_seen)
        reports.append(await consumer.run_once(timeout_ms=500))  # anything more it would read
    handled = [found for report in reports for found in report.outcomes]
    assert handled == [(message_id, Outcome.PROCESSED), (message_id, Outcome.DUPLICATE)]
