"""The consumer helper against real PostgreSQL and Kafka: a record delivered three times
changes the consumer's database once and is acked; a handler exception rolls the inbox row back
and the message comes again (RMS re-delivers it) and is then processed once."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.worker import worker_context
from rms_client.consumer import AckResult, BatchReport, HttpAcker, Outcome, RmsConsumer, RmsRecord
from tests.integration.sdk_consumer.helpers import (
    CountingAcker,
    consume_until,
    copy_record,
    record_effect,
    scalar,
)
from tests.support import Api, AppKeys, produce, read_topic


async def _apps(api: Api) -> tuple[AppKeys, AppKeys]:
    producer = await api.create_app("orders", consume=["none"])
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    return producer, consumer


async def _confirmed(api: Api, producer: AppKeys, topic: str, **fields: object) -> str:
    message_id = await api.prepared_id(producer, topic, **fields)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


def _consumer(api: Api, engine: AsyncEngine, acker: CountingAcker, topic: str, unique: str,
              handler: object = record_effect) -> RmsConsumer:
    return RmsConsumer(app="points", engine=engine, handler=handler,  # type: ignore[arg-type]
                       acker=acker,
                       bootstrap_servers=api.settings.kafka_bootstrap_servers,
                       group_id=f"points-{unique}", topics=[topic])


async def _state(api: Api, message_id: str) -> str:
    response = await api.client.get(f"/v1/admin/messages/{message_id}", headers=api.admin)
    return str(response.json()["state"])


async def test_same_record_three_times_changes_the_database_once_and_acks(
        api: Api, consumer_db: AsyncEngine, topic: str, unique: str) -> None:
    producer, points = await _apps(api)
    message_id = await _confirmed(api, producer, topic, payload={"customer": "c1", "total": 7})
    servers = api.settings.kafka_bootstrap_servers
    (first,) = await read_topic(servers, topic, expect=1)
    await copy_record(servers, first, 2)
    await produce(servers, topic, [{"not": "from rms"}])  # no rms-message-id: skipped
    await copy_record(servers, first, 3)
    acker = CountingAcker(HttpAcker(client=api.client, api_key=points.api_key))

    async def three_seen(reports: list[BatchReport]) -> bool:
        return sum(len(r.outcomes) + r.skipped for r in reports) >= 4

    async with _consumer(api, consumer_db, acker, topic, unique) as consumer:
        reports = await consume_until(consumer, three_seen)
    outcomes = [outcome for report in reports for _, outcome in report.outcomes]
    assert outcomes == [Outcome.PROCESSED, Outcome.DUPLICATE, Outcome.DUPLICATE]
    assert sum(report.skipped for report in reports) == 1
    assert await scalar(consumer_db, "SELECT count(*) FROM effects") == 1
    assert await scalar(consumer_db, "SELECT message_id FROM rms_inbox") == message_id
    assert acker.acks and {a.result for a in acker.acks} == {AckResult.ACKED}
    assert await _state(api, message_id) == "done"


async def test_handler_exception_rolls_back_the_inbox_row_and_the_message_comes_again(
        api: Api, settings: Settings, consumer_db: AsyncEngine, topic: str, unique: str) -> None:
    producer, points = await _apps(api)
    message_id = await _confirmed(api, producer, topic, ack_timeout_seconds=0.3)
    calls: list[int] = []

    async def flaky(conn: AsyncConnection, message: RmsRecord) -> None:
        calls.append(message.delivery)
        await record_effect(conn, message)  # written, then rolled back with the inbox row
        if len(calls) == 1:
            raise RuntimeError("the points table is having a bad day")

    acker = CountingAcker(HttpAcker(client=api.client, api_key=points.api_key))

    async def one_seen(reports: list[BatchReport]) -> bool:
        return any(r.outcomes for r in reports)

    async with (_consumer(api, consumer_db, acker, topic, unique, flaky) as consumer,
                worker_context(settings, "recovery-worker") as context):
        reports = await consume_until(consumer, one_seen)
        assert reports[-1].outcomes == [(message_id, Outcome.FAILED)]
        assert await scalar(consumer_db, "SELECT count(*) FROM rms_inbox") == 0
        assert await scalar(consumer_db, "SELECT count(*) FROM effects") == 0
        assert acker.acks == []
        assert await _state(api, message_id) == "sent"

        worker = from_context(context)

        async def redelivered_and_done(reports: list[BatchReport]) -> bool:
            await worker.tick()
            return await _state(api, message_id) == "done"

        await consume_until(consumer, redelivered_and_done)
    assert calls == [1, 2]
    assert await scalar(consumer_db, "SELECT delivery FROM effects") == 2
    assert await scalar(consumer_db, "SELECT count(*) FROM rms_inbox") == 1
