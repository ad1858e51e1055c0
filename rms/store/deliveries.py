"""Bookkeeping of publishes. A delivery number is reserved (``delivery_count + 1``) by the
statement that makes a message due for publishing (confirm, one-shot send, recovery claim,
admin resend); this module records what the broker then said.

Budget rule (issue 4): only publishes the broker accepted count toward ``max_deliveries``.
A refused or timed-out publish gives its number back (``delivery_count - 1``) and makes the
message due again after ``publish_retry_seconds``; a process that dies between the reservation
and the publish cannot know the outcome, so that reserved number stays counted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, insert, literal, update
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.models import PublishOutcome
from rms.domain.states import Event, State
from rms.store.messages import seconds, with_event
from rms.store.schema import message_events, messages


class DeliveryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def record_accepted(
        self, outcome: PublishOutcome, actor: str, next_due_seconds: float | None
    ) -> None:
        """Append the ``published`` event; with ``next_due_seconds`` also set the ack deadline
        (the confirm path set it already in the confirming statement)."""
        detail = {"delivery": outcome.delivery}
        async with self._engine.begin() as conn:
            if next_due_seconds is None:
                await conn.execute(insert(message_events).values(
                    message_id=outcome.message_id, event=Event.PUBLISHED.value, actor=actor,
                    detail=detail))
                return
            changed = (
                update(messages)
                .where(messages.c.message_id == outcome.message_id,
                       messages.c.state == State.SENT.value,
                       messages.c.delivery_count == outcome.delivery)
                .values(next_delivery_at=func.now() + seconds(literal(next_due_seconds)),
                        claim_token=None)
                .returning(messages.c.message_id)
                .cte("changed")
            )
            result = await conn.execute(with_event(changed, Event.PUBLISHED, actor, detail))
            if result.first() is None:  # acked meanwhile, or re-reserved: history still counts
                await conn.execute(insert(message_events).values(
                    message_id=outcome.message_id, event=Event.PUBLISHED.value, actor=actor,
                    detail=detail))

    async def record_failed(self, outcome: PublishOutcome, actor: str, retry_seconds: float) -> None:
        """Give the reserved delivery number back and make the message due again soon."""
        detail: dict[str, Any] = {"delivery": outcome.delivery, "error": outcome.error}
        changed = (
            update(messages)
            .where(messages.c.message_id == outcome.message_id,
                   messages.c.state == State.SENT.value,
                   messages.c.delivery_count == outcome.delivery)
            .values(delivery_count=messages.c.delivery_count - 1,
                    next_delivery_at=func.now() + seconds(literal(retry_seconds)),
                    claim_token=None)
            .returning(messages.c.message_id)
            .cte("changed")
        )
        async with self._engine.begin() as conn:
            result = await conn.execute(with_event(changed, Event.PUBLISH_FAILED, actor, detail))
            if result.first() is None:
                await conn.execute(insert(message_events).values(
                    message_id=outcome.message_id, event=Event.PUBLISH_FAILED.value, actor=actor,
                    detail=detail))
