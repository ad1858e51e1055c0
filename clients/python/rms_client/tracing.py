"""Spans, in one place: the API and the workers open a span for a prepare, a confirm, a publish,
a check-back and a redelivery, parented on the message's W3C trace context; the consumer SDK
opens one for its handler and its ack.

OpenTelemetry is optional (the ``otel`` extra). Without it, or without a configured tracer
provider, every span here is a no-op that hands its parent's trace context through unchanged:
RMS still carries the producer's ``traceparent`` to the Kafka record and the check-back call,
and OpenTelemetry is never imported. With a tracer provider, a span's own context is what goes
downstream, so the consumer's spans become children of the publish span.

A process gets a tracer provider in one of three ways: :func:`configure_from_environment` at
start-up (``rms serve`` and the workers: the standard ``OTEL_*`` variables, see
docs/operations/monitoring.md), :func:`install` (tests, embedding), or an application that set the
global OpenTelemetry provider itself (a consumer using the SDK).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import import_module
from importlib.metadata import entry_points
from types import TracebackType
from typing import Any, Literal

import structlog

from rms_client.trace import TraceContext, trace_context

log = structlog.get_logger(__name__)

Kind = Literal["internal", "server", "client", "producer", "consumer"]
Attributes = Mapping[str, str | int | bool]
TRACER_NAME = "rms"


class _State:
    """``tracer``: the tracer spans use, None for no-ops; ``settled``: whether that is final
    (else the global provider is looked at again, until an application sets one); ``trace``
    and ``context``: the OpenTelemetry API modules, imported once there is a tracer."""

    tracer: Any = None
    settled: bool = False
    trace: Any = None
    context: Any = None


_state = _State()
_CURRENT: ContextVar[TraceContext | None] = ContextVar("rms_trace_context", default=None)


class Span:
    """A span that records nothing: ``context`` is the parent's (what goes downstream)."""

    __slots__ = ("context",)

    def __init__(self, parent: TraceContext | None) -> None:
        self.context = parent

    def set(self, name: str, value: str | int | bool) -> None:
        """Set an attribute."""

    def fail(self, error: str) -> None:
        """Mark the span failed, saying why."""

    def end(self) -> None:
        """End the span."""

    def __enter__(self) -> Span:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if error is not None:
            self.fail(f"{type(error).__name__}: {error}")
        self.end()


class _Recording(Span):
    """An OpenTelemetry span; ``context`` is its own."""

    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span
        super().__init__(_context_of(span))

    def set(self, name: str, value: str | int | bool) -> None:
        self._span.set_attribute(name, value)

    def fail(self, error: str) -> None:
        api = _state.trace
        self._span.set_status(api.Status(api.StatusCode.ERROR, error))

    def end(self) -> None:
        self._span.end()


def enabled() -> bool:
    """Whether spans are recorded (a tracer provider is configured)."""
    return _tracer() is not None


def start(name: str, parent: TraceContext | None, *, kind: Kind = "internal",
          attributes: Attributes | None = None, started_ns: int | None = None,
          in_request: bool = False) -> Span:
    """Start a span under ``parent`` (None: a new trace); the caller ends it with
    :meth:`Span.end`, or uses it as a context manager. ``started_ns``: when the work began,
    for a span whose parent was known only afterwards (read from the database).

    ``in_request``: ``parent`` is the request's own context, so a span the web framework
    opened for the request (FastAPI's, which continues the same ``traceparent``) is the better
    parent when there is one. Otherwise a current span of another trace (the request of a
    confirm, say) is linked to, not made the parent."""
    tracer = _tracer()
    if tracer is None:
        return Span(parent)
    api = _state.trace
    current = api.get_current_span().get_span_context()
    context = _parent_context(parent)
    links = None
    if current.is_valid:
        if in_request:
            context = None  # the current context: the request's span
        elif parent is None or f"{current.trace_id:032x}" != parent.trace_id:
            links = [api.Link(current)]
    span = tracer.start_span(name, context=context, kind=api.SpanKind[kind.upper()],
                             attributes=attributes, links=links, start_time=started_ns)
    return _Recording(span)


@contextmanager
def current(span: Span) -> Iterator[None]:
    """Make ``span`` the current span of the block: spans the block's own code opens (an SDK
    consumer's handler) become its children, and :func:`current_context` is its context."""
    token = _CURRENT.set(span.context)
    try:
        if not isinstance(span, _Recording):
            yield
            return
        attached = _state.context.attach(_state.trace.set_span_in_context(span._span))
        try:
            yield
        finally:
            _state.context.detach(attached)
    finally:
        _CURRENT.reset(token)


def current_context() -> TraceContext | None:
    """What an outgoing SDK call (an ack, a prepare) carries: the current OpenTelemetry span's
    context when spans are recorded (the application's own span, or one made current by
    :func:`current`), else the context :func:`current` set, else None."""
    if _tracer() is not None:
        found = _context_of(_state.trace.get_current_span())
        if found is not None:
            return found
    return _CURRENT.get()


def clock() -> int | None:
    """Now, for :func:`start`'s ``started_ns`` (None when nothing is recorded)."""
    return time.time_ns() if _tracer() is not None else None


def from_headers(headers: Mapping[str, str]) -> TraceContext | None:
    """The valid W3C context in single-valued headers (a consumed record's), else None."""
    parent = headers.get("traceparent")
    if parent is None:
        return None
    state = headers.get("tracestate")
    return trace_context([parent], [] if state is None else [state])


# ---- providers ---------------------------------------------------------------------------------

def install(provider: Any) -> None:
    """Record spans with ``provider`` (an OpenTelemetry ``TracerProvider``); None: record
    nothing, whatever the global provider."""
    if provider is not None:
        _state.trace = import_module("opentelemetry.trace")
        _state.context = import_module("opentelemetry.context")
    _state.tracer = None if provider is None else provider.get_tracer(TRACER_NAME)
    _state.settled = True


def reset() -> None:
    """Forget :func:`install`: follow the global OpenTelemetry provider again."""
    _state.tracer = None
    _state.settled = False


def configure_from_environment(service: str) -> bool:
    """Start-up of an RMS process: when ``OTEL_TRACES_EXPORTER`` names exporters (and
    ``OTEL_SDK_DISABLED`` is not true), build a tracer provider exporting to them in batches
    and make it the global one; ``OTEL_SERVICE_NAME`` defaults to ``service``. Without those
    variables nothing is imported and nothing recorded, unless the process already has a
    global provider (e.g. under ``opentelemetry-instrument``). Returns whether spans are
    recorded."""
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",")]
    names = [n for n in names if n and n != "none"]
    if not names or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        if "opentelemetry.trace" not in sys.modules:
            install(None)  # nobody imported OpenTelemetry, so nobody set a provider
        return enabled()
    try:
        provider = _provider(service, names)
    except ImportError as exc:
        log.warning("tracing.unavailable", exporters=names, error=str(exc),
                    hint="install rms[otel] (and the exporter's package)")
        return enabled()
    from opentelemetry import trace

    trace.set_tracer_provider(provider)
    install(provider)
    log.info("tracing.configured", exporters=names, service=service)
    return True


def _provider(service: str, names: list[str]) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({} if "OTEL_SERVICE_NAME" in os.environ
                               else {"service.name": service})
    provider = TracerProvider(resource=resource)
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    return provider


def _exporter(name: str) -> Any:
    """The exporter registered under ``name`` (the OpenTelemetry entry points: ``console``
    comes with the SDK, ``otlp`` with the OTLP exporter packages)."""
    if name == "otlp":
        protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                    or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
        name = "otlp_proto_grpc" if protocol == "grpc" else "otlp_proto_http"
    found = entry_points(group="opentelemetry_traces_exporter", name=name)
    if not found:
        raise ImportError(f"no OpenTelemetry span exporter named {name!r} is installed")
    return next(iter(found)).load()()


def _tracer() -> Any:
    if _state.settled:
        return _state.tracer
    try:
        trace = import_module("opentelemetry.trace")
    except ImportError:  # not installed: nothing to follow, ever
        install(None)
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        return None  # not configured (yet): look again next time
    install(provider)  # the global provider is set once per process
    return _state.tracer


def _parent_context(parent: TraceContext | None) -> Any:
    """An OpenTelemetry context whose (remote) span is ``parent``; an empty one for None."""
    api, empty = _state.trace, _state.context.Context()
    if parent is None:
        return empty  # a new trace, not whatever span happens to be current
    value, state = parent.traceparent, parent.tracestate
    remote = api.SpanContext(
        trace_id=int(value[3:35], 16), span_id=int(value[36:52], 16), is_remote=True,
        trace_flags=api.TraceFlags(int(value[53:55], 16)),
        trace_state=api.TraceState.from_header([state]) if state else None)
    return api.set_span_in_context(api.NonRecordingSpan(remote), empty)


def _context_of(span: Any) -> TraceContext | None:
    """The W3C form of a span's context (what goes downstream)."""
    context = span.get_span_context()
    if not context.is_valid:
        return None
    state = context.trace_state.to_header() if context.trace_state else ""
    return TraceContext(f"00-{context.trace_id:032x}-{context.span_id:016x}-"
                        f"{context.trace_flags:02x}", state or None)
