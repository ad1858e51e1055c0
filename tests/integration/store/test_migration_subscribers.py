"""Migration 0011 on a database of the previous schema (0010): existing apps get their
``consume_regex``, and a message that was ``sent`` before keeps the single-ack rule (no
subscribers: its first permitted ack finishes it). The regex PostgreSQL matches (``~``) agrees
with ``fnmatchcase`` on real rows."""

from __future__ import annotations

import asyncio
import uuid
from fnmatch import fnmatchcase

import asyncpg

from rms.devstack.embedded import EmbeddedPostgres
from rms.store.migrate import upgrade
from rms.store.subscriptions.acks import ACK_SQL

_OLD_ROWS = (
    "INSERT INTO apps (name, api_key_hash, signing_secret, consume_topics) VALUES "
    "('orders', 'h1', 's', '{}'), ('points', 'h2', 's', '{orders.*}'), "
    "('invoices', 'h3', 's', '{orders.paid,ship?ing}');"
    "INSERT INTO messages (message_id, app, topic, payload, state, check_after_seconds, "
    "max_checks, ack_timeout_seconds, max_deliveries, confirmed_at, delivery_count, "
    "next_delivery_at) VALUES "
    "('before', 'orders', 'orders.paid', '{}', 'sent', 10, 15, 60, 6, now(), 1, now())")
_TOPICS = ("orders.paid", "orders.x", "ordersXpaid", "shipping", "shipqing", "shiping",
           "my.orders.paid", "orders.")


def _database(postgres: EmbeddedPostgres) -> str:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name), "0010")
    postgres.psql(_OLD_ROWS, name)
    upgrade(postgres.url(name))
    return name


def test_rows_of_the_previous_schema_keep_the_single_ack_rule(
        postgres: EmbeddedPostgres) -> None:
    name = _database(postgres)
    found = postgres.psql("SELECT coalesce(subscribers::text, 'null') || ' ' || "
                          "coalesce(acks::text, 'null') FROM messages", name).strip()
    assert found == "null null"
    finished = asyncio.run(_ack(postgres.dsn(name), "before", "points"))
    assert finished == "done"  # the first permitted ack finishes it, as promised at its confirm
    regexes = postgres.psql("SELECT name || '=' || coalesce(consume_regex, '-') FROM apps "
                            "ORDER BY name", name).split()
    assert regexes[1] == "orders=-"  # no consume topics: subscribes to nothing


async def _ack(url: str, message_id: str, consumer: str) -> str:
    """The ack statement of RMS run on the migrated database; the state it left."""
    connection = await asyncpg.connect(url)
    try:
        [row] = await connection.fetch(ACK_SQL, [message_id], [consumer], ["http"], [None])
    finally:
        await connection.close()
    return str(row["state"])


def test_postgresql_matches_what_fnmatchcase_allows(postgres: EmbeddedPostgres) -> None:
    name = _database(postgres)
    values = ", ".join(f"('{topic}')" for topic in _TOPICS)
    matched = postgres.psql(
        f"SELECT a.name || ':' || t.topic FROM apps a CROSS JOIN (VALUES {values}) AS t(topic) "
        "WHERE t.topic ~ a.consume_regex ORDER BY 1", name).split()
    patterns = {"orders": (), "points": ("orders.*",), "invoices": ("orders.paid", "ship?ing")}
    expected = sorted(f"{app}:{topic}" for app, globs in patterns.items() for topic in _TOPICS
                      if any(fnmatchcase(topic, glob) for glob in globs))
    assert matched == expected


_OLD_ACK = ("UPDATE messages SET state = 'done', done_at = now(), next_delivery_at = NULL "
            "WHERE message_id = $1 AND state = 'sent'")


def test_the_previous_releases_ack_cannot_finish_a_message_some_subscriber_owes(
        postgres: EmbeddedPostgres) -> None:
    """During a rolling update the previous release's ack statement (it writes no ``acks``)
    fails with 57P03, which every release answers with 503, instead of finishing a message
    whose other subscribers still owe it; after every subscriber's ack it is done."""
    name = _database(postgres)
    postgres.psql("UPDATE messages SET subscribers = '{invoices,points}', message_id = 'owed' "
                  "WHERE message_id = 'before'", name)
    assert asyncio.run(_old_ack(postgres.dsn(name), "owed")) == "57P03"
    assert asyncio.run(_ack(postgres.dsn(name), "owed", "points")) == "sent"
    assert asyncio.run(_old_ack(postgres.dsn(name), "owed")) == "57P03"
    assert asyncio.run(_ack(postgres.dsn(name), "owed", "invoices")) == "done"


async def _old_ack(url: str, message_id: str) -> str:
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(_OLD_ACK, message_id)
    except asyncpg.PostgresError as exc:
        return str(exc.sqlstate)
    finally:
        await connection.close()
    return "no error"
