"""Redeliveries and resends carry the message's W3C trace context in their Kafka records, and
with a tracer provider each is a span of the message's trace."""

from __future__ import annotations

from rms.kafka.records import header
from rms.usecases.redelivery import RedeliveryWorker
from tests.integration.redelivery.helpers import message, tick_until
from tests.support import Api, read_topic
from tests.tracing_support import (
    PRODUCER_PARENT,
    PRODUCER_TRACE_ID,
    named,
    only,
    parent_id,
    recorded_spans,
    span_id,
    trace_id,
    traceparent_of,
)


async def _confirmed(api: Api, topic: str) -> str:
    producer = await api.create_app("orders")
    prepared = await api.client.post(
        "/v1/messages", headers=producer.headers | {"traceparent": PRODUCER_PARENT,
                                                    "tracestate": "rojo=1"},
        json={"topic": topic, "payload": {}, "check_url": "http://127.0.0.1:1/c",
              "ack_timeout_seconds": 0.2, "max_deliveries": 2})
    assert prepared.status_code == 201, prepared.text
    message_id = str(prepared.json()["message_id"])
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


async def _delivered(api: Api, worker: RedeliveryWorker, message_id: str, count: int) -> None:
    async def published() -> bool:
        return int((await message(api, message_id))["delivery_count"]) >= count

    await tick_until(worker, published)


async def test_a_redelivery_record_carries_the_stored_context(
        api: Api, worker: RedeliveryWorker, topic: str) -> None:
    message_id = await _confirmed(api, topic)
    await _delivered(api, worker, message_id, 2)
    resent = await api.client.post(f"/v1/admin/messages/{message_id}/resend", headers=api.admin)
    assert resent.status_code == 200, resent.text
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3, settle=0.3)
    assert [header(list(r.headers), "rms-delivery") for r in records] == ["1", "2", "3"]
    for record in records:  # no tracer provider: the producer's context, as it came
        assert header(list(record.headers), "traceparent") == PRODUCER_PARENT
        assert header(list(record.headers), "tracestate") == "rojo=1"


async def test_redelivery_and_resend_are_spans_of_the_messages_trace(
        api: Api, worker: RedeliveryWorker, topic: str) -> None:
    with recorded_spans() as exporter:
        message_id = await _confirmed(api, topic)
        await _delivered(api, worker, message_id, 2)
        resent = await api.client.post(f"/v1/admin/messages/{message_id}/resend",
                                       headers=api.admin)
        assert resent.status_code == 200, resent.text
        spans = exporter.get_finished_spans()
    prepare = only(spans, "rms.prepare")
    redeliver, resend = only(spans, "rms.redeliver"), only(spans, "rms.resend")
    assert {trace_id(s) for s in spans} == {PRODUCER_TRACE_ID}
    # both continue the stored context: the prepare span's
    assert parent_id(redeliver) == span_id(prepare) == parent_id(resend)
    assert redeliver.attributes is not None and redeliver.attributes["rms.delivery"] == 2
    assert len(named(spans, "rms.publish")) == 1  # the confirm's first delivery
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3, settle=0.3)
    carried = {header(list(r.headers), "rms-delivery"): header(list(r.headers), "traceparent")
               for r in records}
    assert carried["2"] == traceparent_of(redeliver)
    assert carried["3"] == traceparent_of(resend)
    assert all(header(list(r.headers), "tracestate") == "rojo=1" for r in records)
