"""Migration 0010 on a database of the previous release (0.1.0, schema 0008): the ordered
messages still unacknowledged get ``published_delivery`` from their history (the ``published``
event of the delivery they count), so the head-of-line rule reads the same as before for them;
a count whose publishes all failed, or whose last delivery was never taken, stays NULL and
holds its key."""

from __future__ import annotations

import uuid

from rms.devstack.embedded import EmbeddedPostgres
from rms.store.migrate import upgrade

_MESSAGES = (
    "INSERT INTO apps (name, api_key_hash, signing_secret, ordered_topics) VALUES "
    "('orders', 'h1', 's', '{ledger}');"
    "INSERT INTO messages (message_id, app, topic, key, payload, state, check_after_seconds, "
    "max_checks, ack_timeout_seconds, max_deliveries, ordered, confirm_seq, delivery_count, "
    "next_delivery_at) VALUES "
    "('taken', 'orders', 'ledger', 'k', '{}', 'sent', 10, 15, 60, 6, true, 1, 1, now()), "
    "('failed', 'orders', 'ledger', 'k', '{}', 'sent', 10, 15, 60, 6, true, 2, 1, now()), "
    "('redelivering', 'orders', 'ledger', 'k', '{}', 'sent', 10, 15, 60, 6, true, 3, 2, now()),"
    "('unordered', 'orders', 'ledger', NULL, '{}', 'sent', 10, 15, 60, 6, false, NULL, 1, "
    "now());"
    "INSERT INTO message_events (message_id, event, actor, detail) VALUES "
    "('taken', 'published', 'w', '{\"delivery\": 1}'), "
    "('failed', 'publish-failed', 'w', '{\"delivery\": 1, \"reason\": \"timeout\"}'), "
    "('failed', 'publish-failed', 'w', '{\"delivery\": 2, \"reason\": \"timeout\"}'), "
    "('redelivering', 'published', 'w', '{\"delivery\": 1}'), "
    "('unordered', 'published', 'w', '{\"delivery\": 1}')")


def test_unacknowledged_ordered_messages_get_what_the_broker_took(
        postgres: EmbeddedPostgres) -> None:
    name = f"m_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    upgrade(postgres.url(name), "0008")
    postgres.psql(_MESSAGES, name)

    upgrade(postgres.url(name))

    found = postgres.psql("SELECT message_id || '=' || coalesce(published_delivery::text, '-') "
                          "FROM messages ORDER BY message_id", name).split()
    assert found == ["failed=-", "redelivering=-", "taken=1", "unordered=-"]
