"""The producer SDK sends the caller's current trace context with its requests, so RMS stores
it with the message (real API and PostgreSQL)."""

from __future__ import annotations

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rms_client import tracing
from rms_client.producer import RetryPolicy, RmsProducer
from rms_client.trace import TraceContext
from tests.support import CHECK_PREFIX, Api, AppKeys
from tests.tracing_support import (
    PRODUCER_PARENT,
    PRODUCER_TRACE_ID,
    only,
    parent_id,
    recorded_spans,
    span_id,
)


@pytest.fixture
async def app(api: Api, unique: str) -> AppKeys:
    return await api.create_app(f"shop-{unique}")


@pytest.fixture
async def rms(rms_transport: httpx.AsyncBaseTransport, app: AppKeys) -> RmsProducer:
    client = httpx.AsyncClient(transport=rms_transport, base_url="http://rms.test")
    return RmsProducer(client=client, api_key=app.api_key, retry=RetryPolicy(attempts=1),
                       default_check_url=CHECK_PREFIX + "check")


async def test_the_applications_span_is_the_parent_of_the_prepare(
        rms: RmsProducer, topic: str) -> None:
    with recorded_spans() as exporter:
        with tracing.start("checkout", TraceContext(PRODUCER_PARENT)) as checkout, \
                tracing.current(checkout):
            prepared = await rms.prepare(topic, {"order": 1})
        spans = exporter.get_finished_spans()
    prepare = only(spans, "rms.prepare")
    assert parent_id(prepare) == span_id(only(spans, "checkout"))
    assert prepared.raw["traceparent"].split("-")[1] == PRODUCER_TRACE_ID


async def test_an_application_span_of_its_own_provider_is_sent(
        rms: RmsProducer, topic: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # the producer application's (here RMS shares it)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        with provider.get_tracer("shop").start_as_current_span("checkout") as checkout:
            prepared = await rms.send(topic, {"order": 2})
    finally:
        tracing.reset()
    context = checkout.get_span_context()
    send = only(exporter.get_finished_spans(), "rms.send")
    assert parent_id(send) == f"{context.span_id:016x}"
    assert prepared.raw["traceparent"].split("-")[1] == f"{context.trace_id:032x}"
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_without_spans_the_context_made_current_is_sent_and_none_outside(
        rms: RmsProducer, topic: str) -> None:
    tracing.install(None)
    try:
        with tracing.current(tracing.Span(TraceContext(PRODUCER_PARENT, "shop=1"))):
            inside = await rms.prepare(topic, {"order": 3})
        outside = await rms.prepare(topic, {"order": 4})
    finally:
        tracing.reset()
    assert (inside.raw["traceparent"], inside.raw["tracestate"]) == (PRODUCER_PARENT, "shop=1")
    assert (outside.raw["traceparent"], outside.raw["tracestate"]) == (None, None)
