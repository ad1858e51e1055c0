"""Migration 0003 (the trace context columns) carries an existing database over: messages
stored before it read back without a trace context and publish as before."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy.ext.asyncio import create_async_engine

from rms.devstack.embedded import EmbeddedPostgres
from rms.domain.models import Message
from rms.kafka.records import build_record, header
from rms.store.messages import MessageStore
from rms.store.migrate import upgrade


async def _read(url: str, message_id: str) -> Message:
    engine = create_async_engine(url)
    try:
        return await MessageStore(engine).get(message_id)
    finally:
        await engine.dispose()


def test_messages_from_before_keep_working(postgres: EmbeddedPostgres) -> None:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    url = postgres.url(name)
    upgrade(url, "0002")
    postgres.psql(
        "INSERT INTO apps (name, api_key_hash, signing_secret) VALUES ('orders', 'h', 's');"
        "INSERT INTO messages (message_id, app, topic, payload, headers, state,"
        " check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, delivery_count)"
        " VALUES ('old-1', 'orders', 'orders.paid', '{\"n\": 1}', '{\"traceparent\": \"x\"}',"
        " 'sent', 10, 15, 60, 6, 1)", name)
    upgrade(url)
    message = asyncio.run(_read(url, "old-1"))
    assert message.trace is None
    assert (message.state.value, message.payload) == ("sent", {"n": 1})
    record = build_record(message, 2)
    assert header(record.headers, "traceparent") == "x"  # its own header, as before
    assert header(record.headers, "rms-delivery") == "2"
    columns = postgres.psql(
        "SELECT string_agg(column_name || ':' || is_nullable, ',' ORDER BY column_name) FROM "
        "information_schema.columns WHERE table_name = 'messages' AND column_name LIKE 'trace%'",
        name).strip()
    assert columns == "traceparent:YES,tracestate:YES"
