"""Releasing a consumer (design section 3): when an app is deleted, or its ``consume_topics``
change so that they no longer match a message's topic, it is removed from the subscribers of
every ``sent`` message it still owes, by the one statement that changes the app, each with a
``released`` event; a message whose remaining subscribers have all acked (or none remain) is
``done`` in the same statement (the RELEASE transition)."""

from __future__ import annotations

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain import transitions as table
from rms.domain.errors import Conflict, NotFound
from rms.domain.states import Event, State
from rms.domain.topics import consume_regex
from rms.store.phase import sql_text
from rms.store.raw import driver_connection
from rms.store.transitions import set_sql

_GIVEN = {"consumer": "$1::text", "remaining": "array_remove(m.subscribers, $1::text)"}


def _released(still_matching: str, reason: str) -> str:
    """The CTEs ``released`` (the messages ``$1`` is released from: those it owes for which
    ``still_matching``, SQL on ``m``, is false) and ``released_history``."""
    owes = sql_text(phase.OWES, "m.", _GIVEN)
    return f"""released AS (
    UPDATE messages m SET {set_sql(table.RELEASE, given=_GIVEN)}
    WHERE m.state = '{table.RELEASE.source.value}' AND {owes} AND NOT ({still_matching})
      AND EXISTS (SELECT 1 FROM apps WHERE name = $1::text)
    RETURNING m.message_id, m.state = '{State.DONE.value}' AS finished
), released_history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id, '{Event.RELEASED.value}', 'rms',
           jsonb_build_object('consumer', $1::text, 'reason', '{reason}', 'done', finished)
    FROM released
)"""


# $1 the app, $2 its new consume_topics, $3 their regex: the messages whose topic the new
# regex does not match release it
SET_CONSUME_TOPICS = f"""
WITH {_released("coalesce(m.topic ~ $3::text, false)", "unsubscribed")}, changed AS (
    UPDATE apps SET consume_topics = $2::text[], consume_regex = $3::text,
                    consume_regex_of = $2::text[] WHERE name = $1::text
    RETURNING name
)
SELECT changed.name, (SELECT count(*) FROM released) AS released FROM changed
"""
# $1 the app: released from everything it owes, then removed (refused while messages or
# transactions of its own are stored: they name it)
DELETE_APP = f"""
WITH {_released("false", "app-deleted")}, deleted AS (
    DELETE FROM apps WHERE name = $1::text RETURNING name
)
SELECT deleted.name, (SELECT count(*) FROM released) AS released FROM deleted
"""


async def set_consume_topics(engine: AsyncEngine, name: str, patterns: tuple[str, ...]) -> int:
    """Replace the app's consume topics; returns how many messages released it."""
    async with driver_connection(engine) as driver:
        row = await driver.fetchrow(SET_CONSUME_TOPICS, name, list(patterns),
                                    consume_regex(patterns))
    if row is None:
        raise NotFound(f"no app named {name!r}")
    return int(row["released"])


async def delete_app(engine: AsyncEngine, name: str) -> int:
    """Delete the app; returns how many messages released it. 409 while messages or
    transactions of its own are stored (nothing is released then)."""
    try:
        async with driver_connection(engine) as driver:
            row = await driver.fetchrow(DELETE_APP, name)
    except asyncpg.ForeignKeyViolationError as exc:
        raise Conflict(f"app {name!r} still has messages or transactions of its own stored; "
                       "they name it: remove them first (retention, or an operator)") from exc
    if row is None:
        raise NotFound(f"no app named {name!r}")
    return int(row["released"])

