"""The redelivery worker's SQL: claim due messages, flag spent ones dead and resend dead letters
in bulk (publish outcomes are written by :mod:`rms.store.dispatch`).

Each statement is guarded the same way as :mod:`rms.store.messages` (``state = 'sent'``, and for
outcomes ``delivery_count = <the number published>``), so an ack, an admin resend or another
worker that got there first simply makes the row not match.

Claiming, one statement per round (:func:`round_statement`):

* a message is *due* when it is ``sent``, not dead and its ``next_delivery_at`` came
  (:data:`rms.domain.phase.READY`): its ack deadline passed, or its publish failed and the
  retry time came (index ``messages_due_deliveries``); a message of a transaction is due only
  once every earlier message of its transaction had a publish accepted
  (:data:`rms.domain.phase.HELD_FOR_ORDER`), so their first deliveries keep their order;
* up to ``limit`` due messages are locked with ``FOR UPDATE SKIP LOCKED``, oldest deadline
  first, so concurrent workers never take the same message in one round;
* a locked message whose budget is spent (``delivery_count - delivery_base >= max_deliveries``)
  is flagged dead (``delivery-exhausted``). Because the ack deadline after the last delivery is
  what made it due, a late ack inside that deadline still wins;
* every other locked message gets its next delivery number reserved (``delivery_count + 1``)
  and ``next_delivery_at`` moved to the end of a lease, so a worker that dies leaves it due
  again when the lease ends.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, literal, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain.listings import MessageFilter
from rms.domain.models import Message
from rms.domain.states import State
from rms.domain.transitions import CLAIM_DELIVERY, RESEND
from rms.store.claims import Round, budget_columns, delivery_claim, locked
from rms.store.listings import dead_for, message_clauses
from rms.store.phase import condition
from rms.store.raw import RawStatement
from rms.store.rows import to_message
from rms.store.schema import messages
from rms.store.transitions import core_values, delivery_detail, event_of, with_event

__all__ = ["RedeliveryStore", "Round", "round_statement"]


def _due() -> list[ColumnElement[bool]]:
    """Due for a publish (:data:`rms.domain.phase.READY`). Ordered messages are the ordering
    sequencer's (:mod:`rms.store.ordering`): the claim round leaves them alone."""
    return [messages.c.state == CLAIM_DELIVERY.source.value, condition(phase.READY),
            condition(phase.Not(phase.ORDERED))]


def round_statement(limit: int, token: str, lease_seconds: float, actor: str) -> Any:
    """One claim round in one statement and one index scan: lock up to ``limit`` due messages
    (oldest deadline first); flag those with a spent budget dead (with a ``dead`` event) and
    reserve the next delivery number of the others under a lease
    (:func:`rms.store.claims.delivery_claim`)."""
    return delivery_claim(
        select(messages.c.message_id, *budget_columns()).where(*_due())
        .order_by(messages.c.next_delivery_at).limit(limit),
        token, lease_seconds, actor)


def _seconds(value: float) -> ColumnElement[Any]:
    return func.make_interval(0, 0, 0, 0, 0, 0, literal(value))


class RedeliveryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._rounds: dict[tuple[int, float, str], RawStatement] = {}

    async def claim_round(self, *, limit: int, token: str, lease_seconds: float,
                          actor: str) -> Round:
        """Flag the spent and claim the rest of up to ``limit`` due messages (one statement,
        on the driver connection: it runs per 1000 messages at full speed)."""
        key = (limit, lease_seconds, actor)
        statement = self._rounds.get(key)
        if statement is None:  # a worker uses one limit, lease and actor (two while probing)
            statement = RawStatement(round_statement(limit, "", lease_seconds, actor),
                                     self._engine.dialect)
            self._rounds[key] = statement
        return Round.of(await statement.fetch(self._engine, round_token=token))

    async def next_due_in(self, within_seconds: float) -> float | None:
        """Seconds until the next delivery falls due, if one does within ``within_seconds``
        (database clock; one probe of the ``messages_due_deliveries`` index)."""
        soon = (select(func.extract("epoch", func.min(messages.c.next_delivery_at) - func.now()))
                .where(messages.c.state == CLAIM_DELIVERY.source.value,
                       condition(phase.Not(phase.DEAD)), condition(phase.Not(phase.DUE)),
                       messages.c.next_delivery_at <= func.now() + _seconds(within_seconds)))
        async with self._engine.connect() as conn:
            wait = (await conn.execute(soon)).scalar_one()
        return None if wait is None else max(0.0, float(wait))

    async def resend_dead(self, where: MessageFilter, limit: int, actor: str) -> list[Message]:
        """The bulk dead-letter resend: in one statement, take up to ``limit`` dead ``sent``
        messages matching ``where`` (oldest first, skipping rows another operator is resending)
        and apply the RESEND transition to them, with a ``resent {"delivery": n}`` event each.
        The caller publishes the returned messages."""
        chosen = locked(
            select(messages.c.message_id)
            .where(dead_for(where.consumer), messages.c.state == State.SENT.value,
                   *message_clauses(where))
            .order_by(messages.c.created_at, messages.c.message_id)
            .limit(limit),
            "chosen")
        changed = (
            update(messages)
            .where(messages.c.message_id == chosen.c.message_id, dead_for(where.consumer),
                   messages.c.state == RESEND.source.value)
            .values(**core_values(RESEND))
            .returning(*messages.c)
            .cte("changed")
        )
        async with self._engine.begin() as conn:
            rows = await conn.execute(with_event(changed, event_of(RESEND), actor, delivery_detail,
                                                 reserves=RESEND.reserves))
            found = [to_message(row) for row in rows]
        return sorted(found, key=lambda m: (m.created_at, m.message_id))
