"""What each consumer owes: per consumer app, the ``sent`` messages whose subscribers it is in
without having acked (the term ``OWES``), the age of the oldest since its confirm, and when an
ack of that app was last recorded (``apps.last_ack_at``). One query over
``unnest(subscribers)``; a message under the single-ack rule owes no one app."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, func, select, true
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain.listings import ConsumerBacklog
from rms.domain.states import State
from rms.store.phase import condition
from rms.store.schema import apps, messages


def _consumer_backlogs() -> Select[Any]:
    consumer = func.unnest(messages.c.subscribers).table_valued("consumer").render_derived()
    oldest = func.extract("epoch", func.now() - func.min(messages.c.confirmed_at))
    owed = (select(consumer.c.consumer, func.count().label("n"), oldest.label("age"))
            .select_from(messages.join(consumer, true()))
            .where(messages.c.state == State.SENT.value,
                   condition(phase.OWES, messages, {"consumer": consumer.c.consumer}))
            .group_by(consumer.c.consumer)).subquery("owed")
    since = func.extract("epoch", func.now() - func.coalesce(apps.c.last_ack_at,
                                                             apps.c.created_at))
    return (select(owed.c.consumer, owed.c.n, owed.c.age, apps.c.last_ack_at,
                   since.label("since_ack"))
            .select_from(owed.outerjoin(apps, apps.c.name == owed.c.consumer))
            .order_by(owed.c.consumer))


CONSUMER_BACKLOGS = _consumer_backlogs()


async def consumer_backlogs(engine: AsyncEngine) -> list[ConsumerBacklog]:
    async with engine.connect() as conn:
        rows = (await conn.execute(CONSUMER_BACKLOGS)).all()
    return [ConsumerBacklog(row.consumer, row.n, _seconds(row.age), row.last_ack_at,
                            _seconds(row.since_ack)) for row in rows]


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)
