"""Bookkeeping of publishes. A delivery number is reserved (``delivery_count + 1``) by the
statement that makes a message due for publishing (confirm, one-shot send, redelivery claim,
admin resend); this module records what the broker then said.

Budget rule: only publishes the broker accepted count toward ``max_deliveries``.
A refused or timed-out publish gives its number back (``delivery_count - 1``) and makes the
message due again after ``publish_retry_seconds``; a process that dies between the reservation
and the publish cannot know the outcome, so that reserved number stays counted.

Many outcomes are written by one statement (:meth:`DispatchStore.record_many`): the rows come
in as one array parameter per column (``unnest``), every guarded change and every event are
made by the same statement, so a batch costs one statement and one commit whatever its size.

History order: the ``published`` event of a publish the broker took comes before the message's
``acked`` event. The statement locks the rows of accepted publishes (``FOR SHARE``, the one
extra cost per publish) before it numbers their events, so an ack comes wholly before or after
it; a publish recorded after its ack (the consumer was faster than the broker's answer) is
dated no later than the ack and settled by one more statement for all such messages of the
batch (holding their rows, so that no ack is written in between).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import structlog
from sqlalchemy import (
    CTE,
    Boolean,
    Float,
    Integer,
    Text,
    and_,
    case,
    func,
    literal,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.models import PublishOutcome
from rms.domain.states import Event
from rms.domain.transitions import ACK, PUBLISH_ACCEPTED, PUBLISH_REFUSED
from rms.store.batch import batch_params, unnest_cte
from rms.store.raw import RawStatement, driver_connection
from rms.store.schema import message_events, messages
from rms.store.transitions import core_values

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Recorded:
    """One publish outcome to write. ``next_due_seconds``: after an accepted publish, the next
    ack deadline (None on the confirm path, which set it in the confirming statement);
    ``retry_seconds``: after a failed one, when the message is due again."""

    outcome: PublishOutcome
    actor: str
    next_due_seconds: float | None = None
    retry_seconds: float = 0.0


_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("message_id", Text), ("delivery", Integer), ("ok", Boolean), ("due", Float),
    ("retry", Float), ("error", Text), ("reason", Text), ("actor", Text))


def _taken(batch: CTE) -> CTE:
    """The rows of the messages whose publish the broker took, locked (``FOR SHARE``) before
    their ``published`` events are numbered: an ack of such a message (an ``UPDATE`` of its
    row) then comes wholly before this statement (the row is found ``done``, as the ack left
    it) or wholly after it (its ``acked`` event is numbered after the ``published`` one). A
    row another statement holds is skipped, not waited for (no lock-order deadlock with a
    batch of acks), and settled after this statement (:meth:`DispatchStore.settle`)."""
    accepted = select(batch.c.message_id).where(batch.c.ok)
    return (select(messages.c.message_id, messages.c.state, messages.c.done_at,
                   messages.c.acks)
            .where(messages.c.message_id.in_(accepted))
            .with_for_update(read=True, skip_locked=True).cte("taken"))


def _record_statement() -> Any:
    """Built once. Binds: one array per column of :data:`_COLUMNS`, named ``rows_<column>``.
    Returns one row per message whose state row changed (accepted and rescheduled, or given
    back; ``settle`` false) and one per accepted publish to settle (``settle`` true: an ack
    may have come before the broker's answer was recorded)."""
    batch = unnest_cte(_COLUMNS)
    taken = _taken(batch)
    guard = and_(messages.c.message_id == batch.c.message_id,
                 messages.c.state == PUBLISH_ACCEPTED.source.value,
                 messages.c.delivery_count == batch.c.delivery)
    rescheduled = (
        update(messages).where(guard, batch.c.ok, batch.c.due.is_not(None))
        .values(**core_values(PUBLISH_ACCEPTED, {"due": batch.c.due}))
        .returning(messages.c.message_id).cte("rescheduled"))
    reason = func.coalesce(batch.c.reason, literal("refused"))
    given_back = (
        update(messages).where(guard, ~batch.c.ok)
        .values(**core_values(PUBLISH_REFUSED, {"retry": batch.c.retry, "reason": reason}))
        .returning(messages.c.message_id).cte("given_back"))
    event = case((batch.c.ok, literal(Event.PUBLISHED.value)),
                 else_=literal(Event.PUBLISH_FAILED.value))
    detail = case((batch.c.ok, func.jsonb_build_object("delivery", batch.c.delivery)),
                  else_=func.jsonb_build_object("delivery", batch.c.delivery,
                                                "error", batch.c.error, "reason", batch.c.reason))
    # the broker took the record before the consumer could acknowledge it: a publish recorded
    # after its message was acknowledged is dated no later than the ack
    done = taken.c.state == ACK.target.value
    at = case((done, func.least(func.now(), taken.c.done_at)), else_=func.now())
    # acked by some subscriber (done, or still owed by others): its acks are settled after
    acked = or_(done, taken.c.acks.is_not(None))
    # history counts every outcome, also when an ack or a re-reservation won meanwhile
    history = message_events.insert().from_select(
        ["message_id", "event", "actor", "detail", "at"],
        select(batch.c.message_id, event, batch.c.actor, detail, at).select_from(
            batch.outerjoin(taken, taken.c.message_id == batch.c.message_id))).cte("history")
    # ``held``: the row was locked by another statement (an ack in progress, not yet visible)
    unsettled = (select(batch.c.message_id, literal(True).label("settle"),
                        taken.c.message_id.is_(None).label("held"))
                 .select_from(batch.outerjoin(taken, taken.c.message_id == batch.c.message_id))
                 .where(batch.c.ok, or_(taken.c.message_id.is_(None), acked)))
    # ``unsettled`` first: it reads ``taken`` whole, so every row is locked before the updates
    # below change it (a row this statement updated first could no longer be locked by it)
    changed = union_all(unsettled,
                        select(rescheduled.c.message_id, literal(False).label("settle"),
                               literal(False).label("held")),
                        select(given_back.c.message_id, literal(False), literal(False)))
    return select(changed.subquery("outcomes")).add_cte(history)


# The ``published`` events of messages recorded after an ack they came before (found acked, or
# their row held by another statement, such as the ack, when the outcome was recorded): once
# whoever held a row is done (:data:`_WAIT`), each ack recorded too early is numbered right
# after the ``published`` event it follows in truth, and that event's time is made no later
# than the ack's. An ack that finished the message (``done`` in its detail; an ack without it
# is one that always does) follows the latest ``published`` event: no delivery is published
# after ``done``, so the latest publish was already under way. An ack that finished nothing
# (one subscriber's of several) is early only when it came before every ``published`` event
# (a consumer faster than the broker's answer to the first publish); one recorded after some
# ``published`` event is in its place, whatever redeliveries to the others follow it. The
# events from a message's first early ack on are numbered again in that order (every other
# event keeps its place relative to the rest). Binds $1: the message ids. Changes nothing for
# a message with no early ack.
# Before it renumbers, the settle holds every row it settles (``FOR SHARE``, in id order):
# an ack still writing one (its event numbered, not yet committed) is waited for, and no ack
# starts until the settle commits, so no ack event lands between renumbered ones. It waits at
# most ``lock_timeout`` and tries again later, so it never holds an ack up long nor takes part
# in a deadlock (an ack batch locks its rows in its own order).
_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '100ms'"
_LOCK = ("SELECT 1 FROM messages WHERE message_id = ANY($1::text[]) "
         "ORDER BY message_id FOR SHARE")
_SETTLE_TRIES = 20
_SETTLE = """
WITH pub AS (
    SELECT message_id, min(id) AS first_id, max(id) AS last_id FROM message_events
    WHERE message_id = ANY($1::text[]) AND event = 'published'
    GROUP BY message_id
), acks AS (
    SELECT e.id, e.message_id, e.at, p.first_id, p.last_id,
           coalesce((e.detail->>'done')::boolean, true) AS finished
    FROM message_events e JOIN pub p ON p.message_id = e.message_id
    WHERE e.message_id = ANY($1::text[]) AND e.event = 'acked' AND e.id < p.last_id
), early AS (
    SELECT id, message_id, at, CASE WHEN finished THEN last_id ELSE first_id END AS anchor
    FROM acks WHERE finished OR id < first_id
), anchored AS (
    SELECT anchor AS id, min(at) AS at FROM early GROUP BY anchor
), start AS (
    SELECT message_id, min(id) AS id FROM early GROUP BY message_id
), later AS (
    SELECT e.id, least(e.at, a.at) AS at
    FROM message_events e
    JOIN start s ON e.message_id = s.message_id AND e.id >= s.id
    LEFT JOIN early x ON x.id = e.id
    LEFT JOIN anchored a ON a.id = e.id
    ORDER BY coalesce(x.anchor, e.id), x.id IS NOT NULL, e.id
), renumbered AS (
    SELECT id, at, nextval(pg_get_serial_sequence('message_events', 'id')) AS new_id
    FROM later
)
UPDATE message_events e SET id = r.new_id, at = r.at FROM renumbered r WHERE e.id = r.id
"""


RECORD = _record_statement()


def _params(records: Sequence[Recorded]) -> dict[str, list[Any]]:
    return batch_params(_COLUMNS, [
        (r.outcome.message_id, r.outcome.delivery, r.outcome.ok, r.next_due_seconds,
         r.retry_seconds, r.outcome.error, r.outcome.reason, r.actor) for r in records])


class DispatchStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._record = RawStatement(RECORD, engine.dialect)

    async def record_many(self, records: Sequence[Recorded]) -> list[bool]:
        """Write every outcome with one statement (in its own transaction). Returns,
        per record, whether its message row changed (False: acked or re-reserved meanwhile,
        or the confirm path's accepted publish, which only appends its event)."""
        if not records:
            return []
        async with driver_connection(self._engine) as driver:
            rows = await driver.fetch(self._record.sql, *self._record.args(**_params(records)))
        changed = {row["message_id"] for row in rows if not row["settle"]}
        await self.settle(sorted({row["message_id"] for row in rows if row["settle"]}))
        return [r.outcome.message_id in changed
                and (not r.outcome.ok or r.next_due_seconds is not None) for r in records]

    async def settle(self, message_ids: Sequence[str]) -> None:
        """Order the history of messages whose accepted publish may have been recorded after
        their ack: the ``published`` event before the ``acked`` ones. One transaction for all of
        them (a consumer faster than the broker's answer makes this every message of a batch,
        so it is never a statement per message): the rows held (:data:`_LOCK`), then the
        renumbering; tried again while an ack holds a row past the lock timeout."""
        if not message_ids:
            return
        ids = sorted(message_ids)
        for attempt in range(_SETTLE_TRIES):
            try:
                async with driver_connection(self._engine) as driver, driver.transaction():
                    await driver.execute(_LOCK_TIMEOUT)
                    await driver.execute(_LOCK, ids)
                    await driver.execute(_SETTLE, ids)
                return
            except asyncpg.LockNotAvailableError:
                await asyncio.sleep(0.01 * (attempt + 1))
            except Exception as exc:  # the outcomes are recorded already
                # a caller told of a failure here would take its recorded publish for lost
                # and publish again; only the order of the events is left as it was written
                log.warning("dispatch.settle_failed", messages=len(ids),
                            error=f"{type(exc).__name__}: {exc}")
                return
        log.warning("dispatch.settle_gave_up", messages=len(ids), tries=_SETTLE_TRIES)
