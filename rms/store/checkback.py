"""The check-back's SQL for messages prepared on their own: claiming due check-backs and
applying their answers (a transaction's are in :mod:`rms.store.transactions`).

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
    ColumnElement,
    CompoundSelect,
    Float,
    Integer,
    Select,
    Text,
    and_,
    bindparam,
    case,
    func,
    literal,
    select,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain import transitions as table
from rms.domain.checkback import Action
from rms.domain.models import Actor, App, Message
from rms.domain.states import DeadReason, Event
from rms.store.apps import APP_COLUMNS
from rms.store.batch import batch_params, unnest_cte
from rms.store.claims import (
    MESSAGES_CHECK_DUE,
    TRANSACTIONS_CHECK_DUE,
    check_claim,
)
from rms.store.phase import condition
from rms.store.raw import RawStatement
from rms.store.rows import message_from, to_app
from rms.store.schema import apps, message_events, messages, transactions
from rms.store.transitions import core_values, event_of, jsonb

DEAD_DETAIL = {"reason": DeadReason.CHECK_EXHAUSTED.value}
BY_CHECK_BACK = {"by": Actor.CHECK_BACK.value}


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


def _claim_statement() -> CompoundSelect[Any]:
    """The claim, built once (:mod:`rms.store.claims`): lock a batch of due messages, oldest
    due first; count the call and push ``next_check_at`` to the end of a lease under a fresh
    token (``CLAIM_CHECK``); flag those with no call left dead instead (``CHECK_EXHAUSTED``).
    Binds: limit, lease, token, actor."""
    claimed, exhausted = check_claim(messages, "message_id", MESSAGES_CHECK_DUE,
                                     table.CLAIM_CHECK, table.CHECK_EXHAUSTED)
    dead_history = message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(exhausted.c.message_id, literal(event_of(table.CHECK_EXHAUSTED).value),
               bindparam("actor"),
               jsonb(DEAD_DETAIL)),
    ).cte("dead_history")
    return union_all(
        select(claimed, literal(False).label("was_exhausted")).add_cte(dead_history),
        select(exhausted, literal(True).label("was_exhausted")),
    )


CLAIM = _claim_statement()


def _oldest_due_lag() -> Select[Any]:
    """Seconds since the oldest due check-back time, of messages and transactions alike."""
    oldest = union_all(
        select(func.min(messages.c.next_check_at).label("due")).where(MESSAGES_CHECK_DUE),
        select(func.min(transactions.c.next_check_at).label("due"))
        .where(TRANSACTIONS_CHECK_DUE),
    ).subquery("oldest")
    return select(func.extract("epoch", func.now() - func.min(oldest.c.due)))


OLDEST_DUE_LAG = _oldest_due_lag()


@dataclass(frozen=True, slots=True)
class Resolution:
    """One answer to record for a message claimed under ``token``."""

    message_id: str
    token: str
    actor: str
    action: Action
    answer: Answer
    delay_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Resolved:
    """What recording a :class:`Resolution` did: ``applied`` is False when the claim was lost
    (only a ``checked`` event marked stale was written); ``sent`` is the confirmed message, to
    publish."""

    applied: bool
    sent: Message | None = None


_BATCH_COLUMNS: tuple[tuple[str, Any], ...] = (
    ("message_id", Text), ("token", Text), ("actor", Text), ("action", Text),
    ("attempt", Integer), ("outcome", Text), ("error", Text), ("delay", Float))
# the transition each answer applies (a retry appends no event beyond its ``checked``)
_TRANSITIONS: dict[Action, table.Transition] = {
    Action.CONFIRM: table.CONFIRM,
    Action.CANCEL: table.CANCEL,
    Action.RETRY: table.RETRY_CHECK,
    Action.EXHAUST: table.CHECK_EXHAUSTED,
}
# the detail of the event that tells what the answer changed, after the ``checked`` event
_SECOND_DETAIL: dict[Action, Mapping[str, Any]] = {
    Action.CONFIRM: BY_CHECK_BACK,
    Action.CANCEL: BY_CHECK_BACK,
    Action.EXHAUST: DEAD_DETAIL,
}


def _resolve(batch: CTE, action: Action) -> CTE:
    """The guarded change for the batch rows of ``action``: only while the row is in the
    transition's source state and still claimed by the token that claimed it (a late worker
    matches nothing)."""
    change = _TRANSITIONS[action]
    returned = [*messages.c] if action is Action.CONFIRM else [messages.c.message_id]
    return (
        update(messages)
        .where(messages.c.message_id == batch.c.message_id, batch.c.action == action.value,
               messages.c.state == change.source.value,
               messages.c.claim_token == batch.c.token)
        .values(**core_values(change, {"delay": batch.c.delay}))
        .returning(*returned, batch.c.token.label("resolved_token"))
        .cte(f"resolved_{action.value}")
    )


def _checked_detail(batch: CTE) -> ColumnElement[Any]:
    """``{"attempt", "outcome"[, "error"]}``, as :attr:`Answer.detail`."""
    base = func.jsonb_build_object("attempt", batch.c.attempt, "outcome", batch.c.outcome)
    return base.op("||")(case((batch.c.error.is_(None), jsonb({})),
                              else_=func.jsonb_build_object("error", batch.c.error)))


def _answers_history(batch: CTE, changed: CTE, sent: CTE) -> CTE:
    """Every answer's ``checked`` event (marked stale when its claim was lost), then for every
    applied one the event of its change, and for a confirm that reserved a delivery its
    ``publishing`` event, in this order per message."""
    joined = batch.outerjoin(changed, and_(changed.c.message_id == batch.c.message_id,
                                           changed.c.resolved_token == batch.c.token))
    stale = case((changed.c.message_id.is_(None), jsonb({"stale": True})),
                 else_=jsonb({}))
    checked = select(batch.c.message_id, literal(0).label("ord"),
                     literal(Event.CHECKED.value).label("event"), batch.c.actor,
                     _checked_detail(batch).op("||")(stale).label("detail")).select_from(joined)
    seconds_events = [
        select(changed.c.message_id, literal(1), literal(event_of(_TRANSITIONS[action]).value),
               changed.c.actor, jsonb(detail))
        .where(changed.c.action == action.value)
        for action, detail in _SECOND_DETAIL.items()
    ]
    publishing = (
        select(sent.c.message_id, literal(2), literal(Event.PUBLISHING.value), batch.c.actor,
               func.jsonb_build_object("delivery", sent.c.delivery_count))
        .join_from(sent, batch, and_(batch.c.message_id == sent.c.message_id,
                                     batch.c.token == sent.c.resolved_token))
        .where(condition(phase.RESERVED, sent)))
    rows = union_all(checked, *seconds_events, publishing).subquery("new_events")
    return message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(rows.c.message_id, rows.c.event, rows.c.actor, rows.c.detail)
        .order_by(rows.c.message_id, rows.c.ord),
    ).cte("answers_history")


def _answers_statement() -> Select[Any]:
    """Built once: record many answers (of any claims) in one statement. Binds: one array per
    column of :data:`_BATCH_COLUMNS`, named ``rows_<column>``. Returns one row per applied
    answer: ``resolved_id``, ``action``, and for a confirm the whole sent message."""
    batch = unnest_cte(_BATCH_COLUMNS)
    resolved = {action: _resolve(batch, action) for action in Action}
    changed = union_all(*(
        select(cte.c.message_id, cte.c.resolved_token, literal(action.value).label("action"))
        for action, cte in resolved.items()
    )).cte("changed")
    with_actor = select(changed, batch.c.actor).join_from(
        changed, batch, and_(batch.c.message_id == changed.c.message_id,
                             batch.c.token == changed.c.resolved_token)).cte("changed_by")
    sent = resolved[Action.CONFIRM]
    history = _answers_history(batch, with_actor, sent)
    return (
        select(changed.c.message_id.label("resolved_id"), changed.c.action,
               *(c for c in sent.c if c.name != "resolved_token"))
        .select_from(changed.outerjoin(sent, sent.c.message_id == changed.c.message_id))
        .add_cte(history)
    )


RECORD_ANSWERS = _answers_statement()


def _answer_params(items: Sequence[Resolution]) -> dict[str, list[Any]]:
    return batch_params(_BATCH_COLUMNS, [
        (i.message_id, i.token, i.actor, i.action.value, i.answer.attempt, i.answer.outcome,
         i.answer.error or None, i.delay_seconds) for i in items])


class CheckBackStore:
    """Every method runs one statement (a claim or a result is atomic on its own), so it runs
    in autocommit: one round trip instead of BEGIN, statement, COMMIT."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._claim = RawStatement(CLAIM, engine.dialect)
        self._record_answers = RawStatement(RECORD_ANSWERS, engine.dialect)

    async def claim(self, limit: int, lease_seconds: float, actor: str) -> Claim:
        """Claim up to ``limit`` due messages, oldest due first (the partial index
        ``messages_due_checks`` serves the scan)."""
        token = f"{actor}:{uuid.uuid4().hex}"
        rows = await self._claim.fetch(self._engine, limit=limit, lease=float(lease_seconds),
                                       token=token, actor=actor)
        return Claim(token, [message_from(r) for r in rows if not r["was_exhausted"]],
                     [message_from(r) for r in rows if r["was_exhausted"]])

    async def apps(self, names: Sequence[str]) -> dict[str, App]:
        """The apps of a batch (their signing secrets and current check_url prefixes)."""
        statement = select(*APP_COLUMNS).where(apps.c.name.in_(sorted(set(names))))
        async with self._engine.connect() as conn:
            return {row.name: to_app(row) for row in await conn.execute(statement)}

    async def resolve_many(self, items: Sequence[Resolution]) -> list[Resolved]:
        """Record many answers with one statement: each one's guarded change (only while its
        claim holds) and events; a lost claim gets only a ``checked`` event marked stale,
        since the call did happen. Returns one :class:`Resolved` per item, in order."""
        if not items:
            return []
        if len({(i.message_id, i.token) for i in items}) < len(items):
            raise ValueError("an answer is recorded once per claim")
        rows = await self._record_answers.fetch(self._engine, **_answer_params(items))
        applied = {row["resolved_id"]: row for row in rows}
        return [_resolved(item, applied.get(item.message_id)) for item in items]

    async def oldest_due_lag(self) -> float:
        """Seconds the oldest due, unclaimed check-back (of a message or of a transaction) is
        overdue (0 when none is)."""
        async with self._engine.connect() as conn:
            lag = (await conn.execute(OLDEST_DUE_LAG)).scalar()
        return max(0.0, float(lag)) if lag is not None else 0.0


def _resolved(item: Resolution, row: Any) -> Resolved:
    """From a row of :data:`RECORD_ANSWERS` (``resolved_id``, ``action``, then the sent
    message's columns), or None when the answer was not applied."""
    if row is None:
        return Resolved(applied=False)
    sent = message_from(row) if item.action is Action.CONFIRM else None
    return Resolved(applied=True, sent=sent)
