"""A check-back call carries the message's W3C trace context in its HTTP headers (real API,
PostgreSQL, broker and callback server); with a tracer provider the call is a span of the
message's trace and the publish that follows a committed answer is its child."""

from __future__ import annotations

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.kafka.records import header
from tests.integration.checkback.helpers import FAST, all_settled, drive
from tests.integration.checkback.servers import Call, CallbackServer, Reply
from tests.support import Api, AppKeys, read_topic
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


async def _prepared(api: Api, producer: AppKeys, server: CallbackServer, topic: str,
                    **headers: str) -> str:
    response = await api.client.post(
        "/v1/messages", headers=producer.headers | headers,
        json={"topic": topic, "payload": {}, "check_url": server.url + "check", **FAST})
    assert response.status_code == 201, response.text
    return str(response.json()["message_id"])


async def _committed(_call: Call) -> Reply:
    return Reply.answer("committed")


async def test_the_check_back_call_carries_traceparent(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    traced = await _prepared(api, producer, server, topic, traceparent=PRODUCER_PARENT,
                             tracestate="rojo=1")
    plain = await _prepared(api, producer, server, topic)
    server.behaviour = _committed
    async with checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, [traced, plain]))
    calls = {call.message_id: call.headers for call in server.calls}
    assert calls[traced]["traceparent"] == PRODUCER_PARENT
    assert calls[traced]["tracestate"] == "rojo=1"
    assert "webhook-signature" in calls[traced]  # still signed as before
    assert "traceparent" not in calls[plain] and "tracestate" not in calls[plain]


async def test_the_check_back_is_a_span_and_parents_the_publish(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    server.behaviour = _committed
    with recorded_spans() as exporter:
        message_id = await _prepared(api, producer, server, topic,
                                     traceparent=PRODUCER_PARENT)
        async with checkback_worker(worker_settings) as worker:
            await drive(worker, lambda: all_settled(api, producer, [message_id]))
        spans = exporter.get_finished_spans()
    prepare, check, publish = (only(spans, n) for n in ("rms.prepare", "rms.check-back",
                                                        "rms.publish"))
    assert {trace_id(s) for s in (prepare, check, publish)} == {PRODUCER_TRACE_ID}
    assert parent_id(check) == span_id(prepare)
    assert check.attributes is not None and check.attributes["rms.outcome"] == "committed"
    assert parent_id(publish) == span_id(check)
    (call,) = server.calls
    assert call.headers["traceparent"] == traceparent_of(check)
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert header(list(record.headers), "traceparent") == traceparent_of(publish)


async def test_an_unanswered_check_back_span_is_failed(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    async def broken(_call: Call) -> Reply:
        return Reply(status=500)

    server.behaviour = broken
    with recorded_spans() as exporter:
        message_id = await _prepared(api, producer, server, topic, traceparent=PRODUCER_PARENT)
        async with checkback_worker(worker_settings) as worker:
            await drive(worker, lambda: _called(server))
        spans = exporter.get_finished_spans()
    check = named(spans, "rms.check-back")[0]
    assert check.status.description == "HTTP 500"
    assert not check.status.is_ok
    assert server.calls[0].message_id == message_id


async def _called(server: CallbackServer) -> bool:
    return bool(server.calls)


async def test_a_transactions_check_back_carries_its_traceparent(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    """A transaction is asked once, with the trace context its messages were prepared with;
    one prepared without it is asked without W3C headers."""
    for transaction_id, headers in (("traced-tx", {"traceparent": PRODUCER_PARENT,
                                                   "tracestate": "rojo=1"}),
                                    ("plain-tx", {})):
        response = await api.client.post("/v1/transactions", headers=producer.headers | headers,
                                         json={"transaction_id": transaction_id,
                                               "check_url": server.url + "check", **FAST,
                                               "messages": [{"topic": topic, "payload": n}
                                                            for n in range(2)]})
        assert response.status_code == 201, response.text
    server.behaviour = _committed

    async def both_confirmed() -> bool:
        states = [(await api.client.get(f"/v1/transactions/{t}", headers=producer.headers)
                   ).json()["state"] for t in ("traced-tx", "plain-tx")]
        return states == ["confirmed", "confirmed"]

    async with checkback_worker(worker_settings) as worker:
        await drive(worker, both_confirmed)
    calls = {call.json["transaction_id"]: call.headers for call in server.calls}
    assert calls["traced-tx"]["traceparent"] == PRODUCER_PARENT
    assert calls["traced-tx"]["tracestate"] == "rojo=1"
    assert "traceparent" not in calls["plain-tx"] and "tracestate" not in calls["plain-tx"]
