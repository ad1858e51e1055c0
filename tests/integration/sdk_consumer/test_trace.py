"""One trace from the producer's prepare to the consumer's ack, against real PostgreSQL and
Kafka: prepare -> confirm -> publish -> the consumer's handler -> its ack, one trace id, each
span the child of the one before; the handler runs with its span current and the HTTP ack
carries the trace context. Also the topic ack, and the consumer SDK without a provider."""

from __future__ import annotations

from itertools import pairwise

import httpx
from aiokafka import AIOKafkaConsumer
from opentelemetry import trace
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms.kafka.records import header
from rms_client import tracing
from rms_client.consumer import AckResult, BatchReport, HttpAcker, Outcome, RmsRecord, TopicAcker
from rms_client.trace import TraceContext
from tests.integration.sdk_consumer.helpers import CountingAcker, consume_until, record_effect
from tests.integration.sdk_consumer.test_consumer import _apps, _consumer
from tests.support import Api, AppKeys
from tests.tracing_support import (
    PRODUCER_PARENT,
    PRODUCER_TRACE_ID,
    only,
    parent_id,
    recorded_spans,
    span_id,
    trace_id,
    traceparent_of,
)


async def _traced_and_confirmed(api: Api, producer: AppKeys, topic: str) -> str:
    prepared = await api.client.post(
        "/v1/messages", headers=producer.headers | {"traceparent": PRODUCER_PARENT},
        json={"topic": topic, "payload": {"order": 7}, "check_url": "http://127.0.0.1:1/c"})
    assert prepared.status_code == 201, prepared.text
    message_id = str(prepared.json()["message_id"])
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


async def _one_outcome(reports: list[BatchReport]) -> bool:
    return any(report.outcomes for report in reports)


async def test_one_trace_from_prepare_to_the_consumers_ack(
        api: Api, consumer_db: AsyncEngine, topic: str, unique: str) -> None:
    producer, points = await _apps(api)
    ack_headers: list[httpx.Headers] = []

    async def remember(request: httpx.Request) -> None:
        if request.url.path.endswith("/ack"):
            ack_headers.append(request.headers)

    api.client.event_hooks["request"].append(remember)
    seen: dict[str, object] = {}

    async def handler(conn: AsyncConnection, message: RmsRecord) -> None:
        seen["record"] = message.trace
        seen["current"] = trace.get_current_span().get_span_context()
        await record_effect(conn, message)

    acker = CountingAcker(HttpAcker(client=api.client, api_key=points.api_key))
    with recorded_spans() as exporter:
        message_id = await _traced_and_confirmed(api, producer, topic)
        async with _consumer(api, consumer_db, acker, topic, unique, handler) as consumer:
            reports = await consume_until(consumer, _one_outcome)
        spans = exporter.get_finished_spans()

    assert reports[-1].outcomes == [(message_id, Outcome.PROCESSED)]
    assert [a.result for a in acker.acks] == [AckResult.ACKED]
    chain = [only(spans, name) for name in
             ("rms.prepare", "rms.confirm", "rms.publish", "rms.process", "rms.ack")]
    assert {trace_id(span) for span in chain} == {PRODUCER_TRACE_ID}
    assert parent_id(chain[0]) == PRODUCER_PARENT[36:52]  # the producer's own span
    for parent, child in pairwise(chain):
        assert parent_id(child) == span_id(parent), (child.name, parent.name)
    prepare, _, publish, process, ack = chain
    # the handler ran with the process span current, under the record's traceparent
    assert seen["record"] == TraceContext(traceparent_of(publish))
    current = seen["current"]
    assert isinstance(current, trace.SpanContext)
    assert f"{current.span_id:016x}" == span_id(process)
    assert process.attributes is not None and process.attributes["rms.outcome"] == "processed"
    # the ack over HTTP carries the ack span's context
    assert [h.get("traceparent") for h in ack_headers] == [traceparent_of(ack)]
    stored = (await api.client.get(f"/v1/messages/{message_id}", headers=producer.headers))
    assert stored.json()["traceparent"] == traceparent_of(prepare)
    assert stored.json()["state"] == "done"


async def test_a_failing_handler_is_a_failed_span_and_is_not_acked(
        api: Api, consumer_db: AsyncEngine, topic: str, unique: str) -> None:
    producer, points = await _apps(api)

    async def broken(conn: AsyncConnection, message: RmsRecord) -> None:
        raise RuntimeError("the points table is having a bad day")

    acker = CountingAcker(HttpAcker(client=api.client, api_key=points.api_key))
    with recorded_spans() as exporter:
        await _traced_and_confirmed(api, producer, topic)
        async with _consumer(api, consumer_db, acker, topic, unique, broken) as consumer:
            await consume_until(consumer, _one_outcome)
        spans = exporter.get_finished_spans()
    process = only(spans, "rms.process")
    assert not process.status.is_ok and process.status.description == "handler failed"
    assert trace_id(process) == PRODUCER_TRACE_ID
    assert [s for s in spans if s.name == "rms.ack"] == []
    assert acker.acks == []


async def test_without_a_provider_the_topic_ack_carries_the_records_context(
        api: Api, consumer_db: AsyncEngine, topic: str, unique: str) -> None:
    producer, points = await _apps(api)
    message_id = await _traced_and_confirmed(api, producer, topic)
    servers = api.settings.kafka_bootstrap_servers
    ack_topic = f"acks-{unique}"
    acker = CountingAcker(TopicAcker(servers, "points", signing_secret=points.signing_secret,
                                     ack_topic=ack_topic))
    tracing.install(None)  # a consumer process that records no spans
    try:
        async with _consumer(api, consumer_db, acker, topic, unique) as consumer:
            reports = await consume_until(consumer, _one_outcome)
    finally:
        tracing.reset()
    assert reports[-1].outcomes == [(message_id, Outcome.PROCESSED)]
    assert [a.result for a in acker.acks] == [AckResult.ACKED]
    reader = AIOKafkaConsumer(ack_topic, bootstrap_servers=servers,
                              auto_offset_reset="earliest", group_id=f"read-{unique}")
    await reader.start()
    try:
        batches = await reader.getmany(timeout_ms=10_000)
    finally:
        await reader.stop()
    (ack,) = [record for batch in batches.values() for record in batch]
    assert header(list(ack.headers), "traceparent") == PRODUCER_PARENT  # passed through
