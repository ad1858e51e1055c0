"""Bookkeeping of publishes. A delivery number is reserved (``delivery_count + 1``) by the
statement that makes a message due for publishing (confirm, one-shot send, redelivery claim,
admin resend); this module records what the broker then said.

Budget rule: only publishes the broker accepted count toward ``max_deliveries``.
A refused or timed-out publish gives its number back (``delivery_count - 1``) and makes the
message due again after ``publish_retry_seconds``; a process that dies between the reservation
and the publish cannot know the outcome, so that reserved number stays counted.

History order: the statement that reserved a delivery appended its ``publishing`` event, before
the publish, so before any ack of it (a consumer can only ack what the broker took). The
outcome completes that event in place (its name, its detail and the actor that published):
``published`` when the broker took the record, ``publish-failed`` with the reason when it did
not. No event is moved or renumbered: the history is in its true order when it is written.
An outcome whose reservation appended no event (written by an earlier release during a rolling
update) appends its event.

Many outcomes are written by one statement (:meth:`DispatchStore.record_many`): the rows come
in as one array parameter per column (``unnest``), every guarded change and every event are
made by the same statement, so a batch costs one statement and one commit whatever its size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    Text,
    and_,
    case,
    exists,
    func,
    literal,
    select,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.models import PublishOutcome
from rms.domain.states import Event
from rms.domain.transitions import PUBLISH_ACCEPTED, PUBLISH_REFUSED
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


def _record_statement() -> Any:
    """Built once. Binds: one array per column of :data:`_COLUMNS`, named ``rows_<column>``.
    Returns one row per message whose state row changed (accepted and rescheduled, or given
    back)."""
    batch = unnest_cte(_COLUMNS)
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
    # history counts every outcome, also when an ack or a re-reservation won meanwhile: the
    # delivery's ``publishing`` event is completed where it stands
    completed = (
        update(message_events)
        .where(message_events.c.message_id == batch.c.message_id,
               message_events.c.event == Event.PUBLISHING.value,
               message_events.c.detail["delivery"].astext.cast(Integer) == batch.c.delivery)
        .values(event=event, detail=detail, actor=batch.c.actor)
        .returning(message_events.c.message_id, message_events.c.detail["delivery"]
                   .astext.cast(Integer).label("delivery"))
        .cte("completed"))
    unreserved = ~exists().where(completed.c.message_id == batch.c.message_id,
                                 completed.c.delivery == batch.c.delivery)
    appended = message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(batch.c.message_id, event, batch.c.actor, detail).where(unreserved)
    ).cte("appended")
    changed = union_all(select(rescheduled.c.message_id), select(given_back.c.message_id))
    return select(changed.subquery("outcomes")).add_cte(appended)


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
        or the confirm path's accepted publish, which only completes its event)."""
        if not records:
            return []
        async with driver_connection(self._engine) as driver:
            rows = await driver.fetch(self._record.sql, *self._record.args(**_params(records)))
        changed = {row["message_id"] for row in rows}
        return [r.outcome.message_id in changed
                and (not r.outcome.ok or r.next_due_seconds is not None) for r in records]
