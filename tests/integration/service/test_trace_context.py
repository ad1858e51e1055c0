"""W3C trace context: parsing as the spec asks of a receiver, storage with the message (API
message object, Kafka record headers), spans with an in-memory exporter, and the path without
OpenTelemetry."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from rms.dispatcher import Dispatcher
from rms.domain.models import Message
from rms.domain.states import State
from rms.kafka.failures import PublishFailure
from rms.kafka.publisher import PublishError
from rms.kafka.records import OutgoingRecord, build_record, header
from rms.store.dispatch import Recorded
from rms_client import tracing
from rms_client.trace import TraceContext, parse_traceparent, parse_tracestate, trace_context
from tests.support import Api, read_topic
from tests.tracing_support import (
    PRODUCER_PARENT,
    PRODUCER_TRACE_ID,
    only,
    parent_id,
    recorded_spans,
    trace_id,
    traceparent_of,
)

VALID = PRODUCER_PARENT


# ---- parsing (pure logic) ----------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    VALID,
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",  # not sampled
    " " + VALID + "\t",  # optional whitespace around a header value
])
def test_valid_traceparent(value: str) -> None:
    assert parse_traceparent(value) == value.strip()


def test_a_later_version_is_read_as_version_00() -> None:
    later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds"
    assert parse_traceparent(later) == VALID
    assert parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") == VALID


@pytest.mark.parametrize("value", [
    "",
    "garbage",
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero parent id
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  # 00 has no more fields
    "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # short trace id
    "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  # later version, no dash
])
def test_invalid_traceparent_is_ignored(value: str) -> None:
    assert parse_traceparent(value) is None
    assert trace_context([value], ["vendor=1"]) is None  # and its tracestate with it


def test_tracestate_members_are_kept_or_the_whole_header_dropped() -> None:
    assert parse_tracestate(["rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"]) == (
        "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    assert parse_tracestate(["rojo=1", "congo=2"]) == "rojo=1,congo=2"  # repeated header
    assert parse_tracestate(["tenant@vendor=x,,"]) == "tenant@vendor=x"  # empty members
    assert parse_tracestate([""]) is None
    assert parse_tracestate(["rojo=1,rojo=2"]) is None  # a key twice
    assert parse_tracestate(["Rojo=1"]) is None  # keys are lower case
    assert parse_tracestate(["rojo=a=b"]) is None  # '=' is not a value character
    assert parse_tracestate([",".join(f"k{n}=v" for n in range(33))]) is None  # > 32 members
    context = trace_context([VALID], ["not a member"])
    assert context == TraceContext(VALID, None)  # a bad tracestate does not drop the parent


def test_two_traceparent_headers_are_invalid() -> None:
    assert trace_context([VALID, VALID]) is None


def _message(trace: TraceContext | None, headers: dict[str, str]) -> Message:
    now = datetime.now(UTC)
    return Message(
        message_id="m-1", app="orders", topic="orders.paid", key=None, payload={"n": 1},
        headers=headers, check_url=None, state=State.SENT, dead=False, dead_reason=None,
        check_count=0, delivery_count=1, delivery_base=0, check_after_seconds=1.0,
        max_checks=1, ack_timeout_seconds=1.0, max_deliveries=1, created_at=now,
        confirmed_at=now, done_at=None, deleted_at=None, next_check_at=None,
        next_delivery_at=None, trace=trace)


def test_record_headers_carry_the_context_in_place_of_same_named_message_headers() -> None:
    carried = TraceContext(VALID, "rojo=1")
    record = build_record(_message(carried, {"Traceparent": "mine", "x": "y"}), 1)
    names = [name for name, _ in record.headers]
    assert names.count("traceparent") == 1 and "Traceparent" not in names
    assert header(record.headers, "traceparent") == VALID
    assert header(record.headers, "tracestate") == "rojo=1"
    assert header(record.headers, "x") == "y"
    # without a context the message's own headers go out as they are
    plain = build_record(_message(None, {"traceparent": "mine"}), 1)
    assert header(plain.headers, "traceparent") == "mine"
    assert header(plain.headers, "tracestate") is None


def test_without_a_provider_a_span_hands_its_parent_through() -> None:
    tracing.install(None)
    try:
        parent = TraceContext(VALID)
        with tracing.start("rms.publish", parent) as span:
            assert span.context is parent
        assert not tracing.enabled()
        assert tracing.clock() is None
    finally:
        tracing.reset()


def test_the_frameworks_request_span_is_the_parent_and_other_traces_are_linked() -> None:
    web = TracerProvider().get_tracer("web-framework")
    request = TraceContextTextMapPropagator().extract({"traceparent": VALID})
    other = TraceContext(f"00-{'1' * 32}-{'2' * 16}-01")
    with recorded_spans() as exporter:
        with web.start_as_current_span("POST /v1/messages", context=request) as http:
            with tracing.start("rms.prepare", TraceContext(VALID), in_request=True):
                pass
            with tracing.start("rms.confirm", other):
                pass
        spans = exporter.get_finished_spans()
    http_id = f"{http.get_span_context().span_id:016x}"
    prepare, confirm = only(spans, "rms.prepare"), only(spans, "rms.confirm")
    assert (trace_id(prepare), parent_id(prepare)) == (PRODUCER_TRACE_ID, http_id)
    assert (trace_id(confirm), parent_id(confirm)) == ("1" * 32, "2" * 16)
    assert [f"{link.context.span_id:016x}" for link in confirm.links] == [http_id]


# ---- the API -----------------------------------------------------------------------------------

async def test_prepare_stores_the_request_context_and_the_record_carries_it(
        api: Api, topic: str) -> None:
    app = await api.create_app("orders")
    response = await api.client.post(
        "/v1/messages", headers=app.headers | {"traceparent": VALID, "tracestate": "rojo=1"},
        json={"topic": topic, "payload": {"n": 1}, "check_url": "http://127.0.0.1:1/c"})
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["traceparent"], body["tracestate"]) == (VALID, "rojo=1")
    message_id = body["message_id"]
    read = (await api.client.get(f"/v1/messages/{message_id}", headers=app.headers)).json()
    assert (read["traceparent"], read["tracestate"]) == (VALID, "rojo=1")
    await api.post(app, f"/v1/messages/{message_id}/confirm")
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert header(list(record.headers), "traceparent") == VALID
    assert header(list(record.headers), "tracestate") == "rojo=1"


async def test_send_and_batch_store_the_context(api: Api, topic: str) -> None:
    app = await api.create_app("orders")
    trace = {"traceparent": VALID}
    sent = await api.client.post(
        "/v1/messages/send", headers=app.headers | trace,
        json={"topic": topic, "payload": 1, "check_url": "http://127.0.0.1:1/c"})
    assert sent.status_code == 201 and sent.json()["traceparent"] == VALID
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert header(list(record.headers), "traceparent") == VALID
    batch = await api.client.post(
        "/v1/messages/batch", headers=app.headers | trace,
        json={"messages": [{"topic": topic, "payload": n, "check_url": "http://127.0.0.1:1/c"}
                           for n in range(2)]})
    assert batch.status_code == 201, batch.text
    assert [m["traceparent"] for m in batch.json()["messages"]] == [VALID, VALID]
    assert [m["tracestate"] for m in batch.json()["messages"]] == [None, None]


@pytest.mark.parametrize("traceparent", [
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", "nonsense", ""])
async def test_an_invalid_traceparent_is_ignored_never_an_error(
        api: Api, topic: str, traceparent: str) -> None:
    app = await api.create_app("orders")
    response = await api.client.post(
        "/v1/messages", headers=app.headers | {"traceparent": traceparent, "tracestate": "a=1"},
        json={"topic": topic, "payload": {}, "check_url": "http://127.0.0.1:1/c"})
    assert response.status_code == 201, response.text
    assert (response.json()["traceparent"], response.json()["tracestate"]) == (None, None)
    await api.post(app, f"/v1/messages/{response.json()['message_id']}/confirm")
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert header(list(record.headers), "traceparent") is None


async def test_a_message_without_context_has_null_fields(api: Api, topic: str) -> None:
    app = await api.create_app("orders")
    body = (await api.prepare(app, topic)).json()
    assert (body["traceparent"], body["tracestate"]) == (None, None)


async def test_openapi_documents_the_headers_and_fields(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    fields = document["components"]["schemas"]["MessageOut"]["properties"]
    assert {"traceparent", "tracestate"} <= set(fields)
    for path in ("/v1/messages", "/v1/messages/send", "/v1/messages/batch"):
        headers = {p["name"] for p in document["paths"][path]["post"]["parameters"]
                   if p["in"] == "header"}
        assert {"traceparent", "tracestate"} <= headers, path


async def test_spans_of_prepare_and_confirm_continue_the_producers_trace(
        api: Api, topic: str) -> None:
    app = await api.create_app("orders")
    with recorded_spans() as exporter:
        response = await api.client.post(
            "/v1/messages", headers=app.headers | {"traceparent": VALID},
            json={"topic": topic, "payload": {}, "check_url": "http://127.0.0.1:1/c"})
        message_id = response.json()["message_id"]
        await api.post(app, f"/v1/messages/{message_id}/confirm")
        spans = exporter.get_finished_spans()
    prepare, confirm, publish = (only(spans, n) for n in ("rms.prepare", "rms.confirm",
                                                          "rms.publish"))
    assert {f"{s.context.trace_id:032x}" for s in (prepare, confirm, publish)} == {
        PRODUCER_TRACE_ID}
    assert parent_id(prepare) == "00f067aa0ba902b7"  # the producer's span
    # stored: the prepare span's context, so the confirm is its child
    assert response.json()["traceparent"] == traceparent_of(prepare)
    assert parent_id(confirm) == f"{prepare.context.span_id:016x}"
    assert parent_id(publish) == f"{confirm.context.span_id:016x}"
    assert publish.attributes is not None and publish.attributes["rms.delivery"] == 1
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert header(list(record.headers), "traceparent") == traceparent_of(publish)


class _RefusingPublisher:
    """A broker that refuses every record (pure logic: the span of a failed publish)."""

    def __init__(self) -> None:
        self.records: list[OutgoingRecord] = []

    async def publish(self, record: OutgoingRecord) -> None:
        self.records.append(record)
        raise PublishError(PublishFailure("timeout", "KafkaTimeoutError"))


class _Bookkeeping:
    async def record_many(self, records: Sequence[Recorded]) -> list[bool]:
        return [True] * len(records)


async def test_a_failed_publish_span_says_why() -> None:
    publisher = _RefusingPublisher()
    dispatcher = Dispatcher(publisher, _Bookkeeping(), 1.0, 60.0)  # type: ignore[arg-type]
    message = _message(TraceContext(VALID), {})
    with recorded_spans() as exporter:
        outcome = await dispatcher.deliver(message, actor="test", reschedule=False)
        spans = exporter.get_finished_spans()
    assert not outcome.ok
    publish = only(spans, "rms.publish")
    assert not publish.status.is_ok and publish.status.description == "timeout"
    assert parent_id(publish) == "00f067aa0ba902b7"
    assert header(publisher.records[0].headers, "traceparent") == traceparent_of(publish)


# ---- without OpenTelemetry ---------------------------------------------------------------------

NO_OTEL = textwrap.dedent("""
    import sys

    class NoOpenTelemetry:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError("no OpenTelemetry here")
            return None

    sys.meta_path.insert(0, NoOpenTelemetry())
    import os
    os.environ["OTEL_TRACES_EXPORTER"] = "console"
    # the workers, the use cases and the consumer SDK (the API's web framework itself
    # depends on opentelemetry-api)
    import confirm_service.runtime
    import recovery_service.cli
    import rms.usecases.messages
    import rms_client.consumer
    from rms_client import tracing
    from rms_client.trace import TraceContext

    parent = TraceContext("PRODUCER_PARENT")
    with tracing.start("rms.publish", parent) as span:
        assert span.context is parent
    assert tracing.configure_from_environment("rms-test") is False
    assert not tracing.enabled()
    print("loaded:", sorted(m for m in sys.modules if m.startswith("opentelemetry")))
""").replace("PRODUCER_PARENT", VALID)


def test_without_opentelemetry_nothing_is_imported_and_context_still_flows() -> None:
    done = subprocess.run([sys.executable, "-c", NO_OTEL], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "loaded: []" in done.stdout
    assert "tracing.unavailable" in done.stdout + done.stderr  # the one warning at start-up


def test_installed_but_unconfigured_records_nothing_and_imports_no_sdk() -> None:
    script = textwrap.dedent("""
        import sys
        import confirm_service.runtime
        import recovery_service.cli
        import rms_client.consumer
        from rms_client import tracing
        assert tracing.configure_from_environment("rms-test") is False
        with tracing.start("rms.publish", None) as span:
            assert span.context is None
        print("sdk:", "opentelemetry.sdk" in sys.modules, "api:", "opentelemetry" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "sdk: False api: False" in done.stdout


def test_configured_from_the_environment_exports_spans() -> None:
    script = textwrap.dedent("""
        from rms_client import tracing
        assert tracing.configure_from_environment("rms-test") is True
        with tracing.start("rms.publish", None):
            pass
        from opentelemetry import trace
        trace.get_tracer_provider().shutdown()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "console",
                               "OTEL_SERVICE_NAME": "rms-probe"})
    assert done.returncode == 0, done.stderr
    exported = orjson.loads(done.stdout[done.stdout.index("{\n"):])  # the console exporter's
    assert exported["name"] == "rms.publish"
    assert exported["resource"]["attributes"]["service.name"] == "rms-probe"
