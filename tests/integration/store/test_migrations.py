"""The Alembic migrations build, from an empty database, exactly the schema the code uses."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from rms.devstack.embedded import EmbeddedPostgres
from rms.store.migrate import upgrade
from rms.store.schema import metadata


def _diff(url: str) -> list[Any]:
    async def run() -> list[Any]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(_compare)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _compare(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, metadata))


def test_upgrade_from_empty_matches_models(postgres: EmbeddedPostgres) -> None:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name))
    assert _diff(postgres.url(name)) == []
    tables = postgres.psql("SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables "
                           "WHERE schemaname = 'public'", name).strip()
    assert tables == ("alembic_version,apps,message_events,messages,ordering_keys,"
                      "retention_status,transactions")


def test_due_work_uses_partial_indexes(postgres: EmbeddedPostgres) -> None:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name))
    plan = postgres.psql(
        "SET enable_seqscan = off; EXPLAIN SELECT message_id FROM messages "
        "WHERE state = 'pending-send' AND NOT dead AND next_check_at <= now() "
        "ORDER BY next_check_at LIMIT 100 FOR UPDATE SKIP LOCKED", name)
    assert "messages_due_checks" in plan
    plan = postgres.psql(
        "SET enable_seqscan = off; EXPLAIN SELECT message_id FROM messages "
        "WHERE state = 'sent' AND NOT dead AND next_delivery_at <= now() "
        "ORDER BY next_delivery_at LIMIT 100 FOR UPDATE SKIP LOCKED", name)
    assert "messages_due_deliveries" in plan


def test_key_ordering_migration_keeps_existing_rows_working(postgres: EmbeddedPostgres) -> None:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name), "0002")
    postgres.psql(
        "INSERT INTO apps (name, api_key_hash, signing_secret, produce_topics) "
        "VALUES ('orders', 'h', 's', '{orders.*}'); "
        "INSERT INTO messages (message_id, app, topic, key, payload, state, "
        "check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, delivery_count, "
        "next_delivery_at) VALUES ('old', 'orders', 'orders.paid', 'k', '{}', 'sent', 10, 15, "
        "60, 6, 1, now() - interval '1 second')", name)

    upgrade(postgres.url(name), "0005")

    row = postgres.psql("SELECT ordered, confirm_seq IS NULL, delivery_count FROM messages "
                        "WHERE message_id = 'old'", name).strip()
    assert row.replace(" ", "") == "f|t|1"
    topics = postgres.psql("SELECT ordered_topics FROM apps WHERE name = 'orders'", name)
    assert topics.strip() == "{}"
    # the unordered recovery claim still finds it due
    due = postgres.psql("SELECT count(*) FROM messages WHERE state = 'sent' AND NOT dead "
                        "AND next_delivery_at <= now() AND NOT ordered", name)
    assert due.strip() == "1"


def test_transactions_migration_carries_existing_messages_over(postgres: EmbeddedPostgres
                                                               ) -> None:
    """A database of the release before transactions: its messages belong to no transaction
    and keep working (confirm, the recovery claim) after the upgrade."""
    from rms.domain.models import Actor
    from rms.domain.transitions import CONFIRM
    from rms.store.database import open_engine
    from rms.store.messages import MessageStore
    from rms.store.redelivery import RedeliveryStore

    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name), "0002")
    postgres.psql(
        "INSERT INTO apps (name, api_key_hash, signing_secret) VALUES ('orders', 'h', 's');"
        "INSERT INTO messages (message_id, app, topic, payload, state, check_after_seconds, "
        "max_checks, ack_timeout_seconds, max_deliveries, next_check_at) VALUES "
        "('old-1', 'orders', 'orders.paid', '{}', 'pending-send', 10, 15, 60, 6, now()), "
        "('old-2', 'orders', 'orders.paid', '{}', 'sent', 10, 15, 0.001, 6, NULL)", name)
    postgres.psql("UPDATE messages SET next_delivery_at = now() - interval '1 second' "
                  "WHERE message_id = 'old-2'", name)

    upgrade(postgres.url(name))

    async def run() -> tuple[str, list[str]]:
        engine = open_engine(postgres.url(name))
        try:
            confirmed, changed = await MessageStore(engine).transition(
                "old-1", CONFIRM, app="orders", actor="app:orders", by=Actor.PRODUCER)
            assert changed and confirmed.transaction_id is None
            claimed = await RedeliveryStore(engine).claim_round(
                limit=10, token="t", lease_seconds=30, actor="test")
            return confirmed.state.value, [m.message_id for m in claimed.claimed]
        finally:
            await engine.dispose()

    assert asyncio.run(run()) == ("sent", ["old-2"])
    assert postgres.psql("SELECT count(*) FROM transactions", name).strip() == "0"


def test_ordering_per_app_migration_ends_leases_and_keys_each_apps_messages(
        postgres: EmbeddedPostgres) -> None:
    """A database of the release with keys per (topic, key): after the upgrade the leases in
    flight are gone, and the queued ordered messages of two apps sharing a topic and key are
    two keys, each in its confirm order."""
    from rms.store.database import open_engine
    from rms.store.ordering import Key, OrderingStore

    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name), "0006")
    postgres.psql(
        "INSERT INTO apps (name, api_key_hash, signing_secret, ordered_topics) VALUES "
        "('orders', 'h1', 's', '{ledger}'), ('billing', 'h2', 's', '{ledger}');"
        "INSERT INTO messages (message_id, app, topic, key, payload, state, "
        "check_after_seconds, max_checks, ack_timeout_seconds, max_deliveries, ordered, "
        "confirm_seq, next_delivery_at) SELECT 'm' || n, "
        "CASE WHEN n % 2 = 0 THEN 'orders' ELSE 'billing' END, 'ledger', 'k', '{}', 'sent', "
        "10, 15, 60, 6, true, nextval('messages_confirm_seq'), now() - interval '1 second' "
        "FROM generate_series(1, 4) AS n;"
        "INSERT INTO ordering_keys (topic, key, lease_token, lease_until) "
        "VALUES ('ledger', 'k', 'old-worker', now() + interval '1 hour')", name)

    upgrade(postgres.url(name))

    assert postgres.psql("SELECT count(*) FROM ordering_keys", name).strip() == "0"

    async def run() -> tuple[list[Key], dict[Key, list[str]]]:
        engine = open_engine(postgres.url(name))
        try:
            store = OrderingStore(engine)
            keys = await store.lease_keys(limit=10, token="t", lease_seconds=30)
            queues = await store.queues("t", 10)
            return sorted(keys, key=lambda k: k.app), {
                key: [q.message.message_id for q in queue] for key, queue in queues.items()}
        finally:
            await engine.dispose()

    keys, queues = asyncio.run(run())
    assert keys == [Key("billing", "ledger", "k"), Key("orders", "ledger", "k")]
    assert queues == {Key("billing", "ledger", "k"): ["m1", "m3"],
                      Key("orders", "ledger", "k"): ["m2", "m4"]}
