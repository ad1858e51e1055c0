"""The confirm service's SQL: claiming due check-backs and applying their answers.

A claim is one statement: lock a batch of due messages with ``FOR UPDATE SKIP LOCKED`` (so any
number of workers share the work without checking a message twice in a round), push their
``next_check_at`` forward by the lease, stamp a fresh ``claim_token`` and count the attempt.
A worker that dies leaves its claims to expire: they are simply due again. Every answer is
written by an ``UPDATE ... WHERE state = 'pending-send' AND claim_token = :token``, so a worker
that wakes after its lease expired changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    CTE,
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Select,
    and_,
    bindparam,
    func,
    insert,
    literal,
    not_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.models import Actor, App, Message
from rms.domain.states import DeadReason, Event, State
from rms.store.apps import APP_COLUMNS
from rms.store.messages import CANCEL, CONFIRM, seconds
from rms.store.rows import to_app, to_message
from rms.store.schema import apps, message_events, messages

Detail = Mapping[str, Any] | BindParameter[Any]
EventSpec = tuple[Event, Detail]
DEAD_DETAIL = {"reason": DeadReason.CHECK_EXHAUSTED.value}
BY_CHECK_BACK = {"by": Actor.CHECK_BACK.value}
_DUE = and_(messages.c.state == State.PENDING_SEND.value, not_(messages.c.dead),
            messages.c.next_check_at <= func.now())


@dataclass(frozen=True, slots=True)
class Claim:
    """One worker's batch. ``messages`` are to be checked now (``check_count`` already counts
    this attempt); ``exhausted`` were due with no attempt left (the worker that made their last
    call died before recording its answer) and were flagged dead instead of called again."""

    token: str
    messages: list[Message]
    exhausted: list[Message]


@dataclass(frozen=True, slots=True)
class Answer:
    """A check-back result to record for one claimed message."""

    attempt: int
    outcome: str
    error: str | None = None

    @property
    def detail(self) -> dict[str, Any]:
        detail: dict[str, Any] = {"attempt": self.attempt, "outcome": self.outcome}
        return detail | ({"error": self.error} if self.error else {})


def _detail(detail: Detail) -> ColumnElement[Any]:
    return detail if isinstance(detail, BindParameter) else literal(dict(detail), JSONB)


def with_events(changed: CTE, actor: ColumnElement[Any], events: Sequence[EventSpec]
                ) -> Select[Any]:
    """``SELECT * FROM changed`` that also appends ``events`` (in this order) for every changed
    row: like :func:`rms.store.messages.with_event`, for a change that tells two things (a
    check was made, and what it changed)."""
    parts = [
        select(changed.c.message_id, literal(order).label("ord"),
               literal(event.value).label("event"), _detail(detail).label("detail"))
        for order, (event, detail) in enumerate(events)
    ]
    rows = union_all(*parts).subquery("new_events")
    history = message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(rows.c.message_id, rows.c.event, actor, rows.c.detail).order_by(
            rows.c.message_id, rows.c.ord),
    ).cte("history")
    return select(changed).add_cte(history)


def _guarded(values: Mapping[str, Any], events: Sequence[EventSpec]) -> Select[Any]:
    """A result statement, built once: the change and its events for one message, only while
    this claim holds it. Binds: target_id, token, actor, checked (the checked event detail).
    No bind is named after a column: Core would read it as a SET value."""
    changed = (
        update(messages)
        .where(messages.c.message_id == bindparam("target_id"),
               messages.c.state == State.PENDING_SEND.value,
               messages.c.claim_token == bindparam("token"))
        .values(**values).returning(*messages.c).cte("changed")
    )
    return with_events(changed, bindparam("actor"), events)


def _claim_statement() -> CompoundSelect[Any]:
    """The claim, built once. Binds: limit, lease, token, actor."""
    due = (
        select(messages.c.message_id,
               (messages.c.check_count >= messages.c.max_checks).label("exhausted"))
        .where(_DUE).order_by(messages.c.next_check_at).limit(bindparam("limit"))
        .with_for_update(skip_locked=True).cte("due").prefix_with("MATERIALIZED")
    )
    claimed = (
        update(messages)
        .where(messages.c.message_id == due.c.message_id, not_(due.c.exhausted))
        .values(next_check_at=func.now() + seconds(bindparam("lease")),
                claim_token=bindparam("token"), check_count=messages.c.check_count + 1)
        .returning(*messages.c).cte("claimed")
    )
    exhausted = (
        update(messages)
        .where(messages.c.message_id == due.c.message_id, due.c.exhausted)
        .values(dead=True, dead_reason=DeadReason.CHECK_EXHAUSTED.value, next_check_at=None,
                claim_token=None)
        .returning(*messages.c).cte("exhausted")
    )
    dead_history = message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(exhausted.c.message_id, literal(Event.DEAD.value), bindparam("actor"),
               literal(DEAD_DETAIL, JSONB)),
    ).cte("dead_history")
    return union_all(
        select(claimed, literal(False).label("was_exhausted")).add_cte(dead_history),
        select(exhausted, literal(True).label("was_exhausted")),
    )


_CHECKED = bindparam("checked", type_=JSONB)
CLAIM = _claim_statement()
CONFIRM_CHECKED = _guarded(CONFIRM.values, [(Event.CHECKED, _CHECKED),
                                            (CONFIRM.event, BY_CHECK_BACK)])
CANCEL_CHECKED = _guarded(CANCEL.values, [(Event.CHECKED, _CHECKED),
                                          (CANCEL.event, BY_CHECK_BACK)])
RETRY_LATER = _guarded({"next_check_at": func.now() + seconds(bindparam("delay")),
                        "claim_token": None}, [(Event.CHECKED, _CHECKED)])
EXHAUST = _guarded({"dead": True, "dead_reason": DeadReason.CHECK_EXHAUSTED.value,
                    "next_check_at": None, "claim_token": None},
                   [(Event.CHECKED, _CHECKED), (Event.DEAD, DEAD_DETAIL)])


class CheckStore:
    """Every method runs one statement (a claim or a result is atomic on its own), so it runs
    in autocommit: one round trip instead of BEGIN, statement, COMMIT."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def claim(self, limit: int, lease_seconds: float, actor: str) -> Claim:
        """Claim up to ``limit`` due messages, oldest due first (the partial index
        ``messages_due_checks`` serves the scan)."""
        token = f"{actor}:{uuid.uuid4().hex}"
        params = {"limit": limit, "lease": lease_seconds, "token": token, "actor": actor}
        async with self._engine.connect() as conn:
            rows = (await conn.execute(CLAIM, params)).all()
        return Claim(token, [to_message(r) for r in rows if not r.was_exhausted],
                     [to_message(r) for r in rows if r.was_exhausted])

    async def apps(self, names: Sequence[str]) -> dict[str, App]:
        """The apps of a batch (their signing secrets and current check_url prefixes)."""
        statement = select(*APP_COLUMNS).where(apps.c.name.in_(sorted(set(names))))
        async with self._engine.connect() as conn:
            return {row.name: to_app(row) for row in await conn.execute(statement)}

    async def confirm(self, message: Message, token: str, actor: str, answer: Answer
                      ) -> Message | None:
        """``committed``: the producer-confirm transition (same values, same event), guarded by
        the claim. Returns the sent message to publish, or None when the claim was lost."""
        return await self._apply(CONFIRM_CHECKED, message, token, actor, answer)

    async def cancel(self, message: Message, token: str, actor: str, answer: Answer
                     ) -> Message | None:
        """``rolled_back``: the producer-cancel transition, guarded by the claim."""
        return await self._apply(CANCEL_CHECKED, message, token, actor, answer)

    async def retry_later(self, message: Message, token: str, actor: str, answer: Answer,
                          delay_seconds: float) -> Message | None:
        """``unknown`` with attempts left: due again after ``delay_seconds`` (database clock)."""
        return await self._apply(RETRY_LATER, message, token, actor, answer,
                                 delay=delay_seconds)

    async def exhaust(self, message: Message, token: str, actor: str, answer: Answer
                      ) -> Message | None:
        """``unknown`` on the last attempt: flag dead (kept, never called again)."""
        return await self._apply(EXHAUST, message, token, actor, answer)

    async def oldest_due_lag(self) -> float:
        """Seconds the oldest due, unclaimed check is overdue (0 when none is)."""
        statement = select(func.extract("epoch", func.now() - func.min(messages.c.next_check_at))
                           ).where(_DUE)
        async with self._engine.connect() as conn:
            lag = (await conn.execute(statement)).scalar()
        return max(0.0, float(lag)) if lag is not None else 0.0

    async def _apply(self, statement: Select[Any], message: Message, token: str, actor: str,
                     answer: Answer, **extra: Any) -> Message | None:
        """One guarded statement: the change and its events, or (claim lost) only a ``checked``
        event marked stale, since the call did happen."""
        params = {"target_id": message.message_id, "token": token, "actor": actor,
                  "checked": answer.detail} | extra
        async with self._engine.connect() as conn:
            row = (await conn.execute(statement, params)).first()
            if row is not None:
                return to_message(row)
            await conn.execute(insert(message_events).values(
                message_id=message.message_id, event=Event.CHECKED.value, actor=actor,
                detail=answer.detail | {"stale": True}))
        return None
