"""Acknowledgements by consumer (design section 3): one statement records the acks of many
items, each naming its message, its consumer and the path it came by (and, from the ack
topic, the message instance), and finishes each message whose last owed ack it records.

The statement is the permission check too: an item counts only where its consumer's
``consume_regex`` matches the message's topic, the consumer owes the message (or the message
has no subscribers: the single-ack rule) and, when given, the row is the instance named. An
item by an app that may consume the topic but is not a subscriber appends ``ack-ignored``
(once per consumer and message: its repeats append nothing, so they cannot grow another
producer's history) and changes nothing. Each consumer whose ack the statement records has
its ``apps.last_ack_at`` set (database clock), at most once a second per app so that the acks
of one busy consumer do not queue on its app's row: what shows a consumer app that owes
messages and acknowledges none. The ACK transition's effects and its conditions are rendered from the
transition table, as every other transition's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rms.domain import phase
from rms.domain import transitions as table
from rms.domain.states import Event, State
from rms.store.batch import unnest_sql
from rms.store.phase import sql_text
from rms.store.subscriptions.terms import consumes_sql
from rms.store.transitions import set_sql

_ITEMS = (("message_id", "text"), ("consumer", "text"), ("via", "text"),
          ("created_at", "timestamptz"))
_GIVEN = {"consumer": "u.consumer", "via": "u.via"}
# the item's consumer may consume the message's topic and the row is the instance it names
_PERMITTED = (f"a.name = u.consumer AND m.message_id = u.message_id AND {consumes_sql('m.topic')} "
              "AND (u.created_at IS NULL OR m.created_at = u.created_at)")
_SENT = f"m.state = '{table.ACK.source.value}'"


def ack_sql(returning: str = "m.*") -> str:
    """The ack of many items (parameters: the arrays of message ids, consumers, vias and
    instances, NULL for none); returns ``returning`` of each changed row with ``ack_consumer``.
    An id must appear once per execution (:func:`rounds`)."""
    return f"""
WITH input AS (
    {unnest_sql(_ITEMS)}
), changed AS (
    UPDATE messages m SET {set_sql(table.ACK, given=_GIVEN)}
    FROM input u JOIN apps a ON a.name = u.consumer
    WHERE {_PERMITTED} AND {_SENT} AND {sql_text(phase.ACK_COUNTS, "m.", _GIVEN)}
    RETURNING {returning}, u.consumer AS ack_consumer, u.via AS ack_via,
              m.state = '{State.DONE.value}' AS ack_done
), ignored AS (
    SELECT m.message_id, u.consumer, u.via
    FROM input u JOIN apps a ON a.name = u.consumer JOIN messages m ON m.message_id = u.message_id
    WHERE {_PERMITTED} AND {_SENT} AND {sql_text(phase.NOT_A_SUBSCRIBER, "m.", _GIVEN)}
      AND NOT EXISTS (SELECT 1 FROM message_events e WHERE e.message_id = m.message_id
                      AND e.event = '{Event.ACK_IGNORED.value}' AND e.actor = 'app:' || u.consumer)
), last_ack AS (
    UPDATE apps SET last_ack_at = now() WHERE name IN (SELECT ack_consumer FROM changed)
      AND (last_ack_at IS NULL OR last_ack_at < now() - interval '1 second')
), history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id, '{Event.ACKED.value}', 'app:' || ack_consumer,
           jsonb_build_object('via', ack_via, 'done', ack_done) FROM changed
    UNION ALL
    SELECT message_id, '{Event.ACK_IGNORED.value}', 'app:' || consumer,
           jsonb_build_object('via', via, 'reason', 'not-a-subscriber') FROM ignored
)
SELECT * FROM changed
"""


ACK_SQL = ack_sql()
# the ack topic's batch: the ids changed are all it needs
ACK_MANY_SQL = ack_sql(returning="m.message_id")


@dataclass(frozen=True, slots=True)
class AckItem:
    """``consumer``'s ack of ``message_id`` by ``via`` (``http`` | ``ack-topic``);
    ``created_at``: the instance it was written for (None: the one stored)."""

    message_id: str
    consumer: str
    via: str
    created_at: datetime | None = None


def rounds(items: Sequence[AckItem]) -> list[list[int]]:
    """The items' indexes in rounds in which each message id appears once: an ``UPDATE``
    changes a row once per statement, so two consumers' acks of one message in one batch go in
    successive statements (and a repeat of one consumer's ack finds it recorded)."""
    found: list[list[int]] = []
    seen: list[set[str]] = []
    for index, item in enumerate(items):
        level = next((n for n, ids in enumerate(seen) if item.message_id not in ids), len(seen))
        if level == len(seen):
            found.append([])
            seen.append(set())
        found[level].append(index)
        seen[level].add(item.message_id)
    return found


async def apply_acks(driver: Any, sql: str, items: Sequence[AckItem]) -> list[Any | None]:
    """Run ``sql`` (:func:`ack_sql`) for ``items``, round by round on ``driver``; per item the
    row its ack changed, or None when it changed nothing."""
    changed: list[Any | None] = [None] * len(items)
    for indexes in rounds(items):
        chosen = [items[i] for i in indexes]
        rows = await driver.fetch(
            sql, [i.message_id for i in chosen], [i.consumer for i in chosen],
            [i.via for i in chosen], [i.created_at for i in chosen])
        by_id = {row["message_id"]: row for row in rows}
        for index in indexes:
            changed[index] = by_id.get(items[index].message_id)
    return changed


@dataclass(frozen=True, slots=True)
class AckTarget:
    """What an ack record is judged against: the message's topic (who may acknowledge it) and
    its creation time (which instance of the id it is)."""

    topic: str
    created_at: datetime
