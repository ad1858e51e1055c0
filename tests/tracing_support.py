"""Spans recorded in memory (the OpenTelemetry SDK's own exporter) for the trace tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rms_client import tracing

# a producer's own span: the context its prepare request carries
PRODUCER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PRODUCER_PARENT = f"00-{PRODUCER_TRACE_ID}-00f067aa0ba902b7-01"


@contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """RMS records spans into the returned exporter inside the block, and none after it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.reset()
        provider.shutdown()


def named(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def only(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r} in {[s.name for s in spans]}"
    return found[0]


def trace_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


def parent_id(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"


def traceparent_of(span: ReadableSpan) -> str:
    """The ``traceparent`` a record or call made under ``span`` carries."""
    return f"00-{trace_id(span)}-{span_id(span)}-01"
