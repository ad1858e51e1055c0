"""Operator queries: filtered listing with a keyset cursor, stats and blocked publishes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Select,
    and_,
    bindparam,
    case,
    func,
    literal,
    null,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain.listings import MessageFilter
from rms.domain.models import Message
from rms.domain.ordering import BLOCKED_BY, Blocked
from rms.domain.states import Event, State
from rms.metrics import RetentionFigures
from rms.store.listings import decode_cursor, encode_key, message_clauses
from rms.store.phase import condition
from rms.store.rows import to_message
from rms.store.schema import message_events, messages, retention_status


@dataclass(frozen=True, slots=True)
class GroupCounts:
    app: str
    topic: str
    counts: dict[str, int]
    oldest_pending_send_age_seconds: float | None
    oldest_unacked_age_seconds: float | None


@dataclass(frozen=True)
class BlockedPublishes:
    """Sent messages whose last publish failed, by app, topic and reason (for example
    ``topic-missing``): waiting for the cluster, not for a consumer."""

    app: str
    topic: str
    reason: str
    messages: int
    oldest_confirmed_age_seconds: float | None


@dataclass(frozen=True)
class BlockedKey:
    """An ordered key ``(app, topic, key)`` held back by ``message_id``: ``dead`` (until an
    operator resolves it), ``publish-failed`` (waiting for its retry), ``awaiting-redelivery``
    (its ack deadline passed), ``scheduled`` (delayed, its ``deliver_after`` not come) or
    ``held-for-order`` (an earlier message of its transaction not yet published); ``waiting``:
    the key's later messages not yet published."""

    topic: str
    key: str
    app: str
    message_id: str
    reason: str
    waiting: int


def _blocked_keys() -> Select[Any]:
    """Per key, its head: the first ordered unacknowledged message that holds the line (the
    head-of-line rule, :data:`rms.domain.phase.HOLDS_LINE`; index messages_ordered_keys); a
    key is blocked when its head is dead, or holds back later messages for a reason of
    :data:`rms.domain.ordering.BLOCKED_BY`. Binds ``limit``."""
    ordered_sent = (condition(phase.ORDERED), messages.c.state == State.SENT.value)
    columns = {*phase.COLUMNS, "app", "topic", "key", "confirm_seq"}
    heads = (select(*(c for c in messages.c if c.name in columns))
             .where(*ordered_sent, condition(phase.HOLDS_LINE))
             .ext(distinct_on(messages.c.app, messages.c.topic, messages.c.key))
             .order_by(messages.c.app, messages.c.topic, messages.c.key,
                       messages.c.confirm_seq)
             .cte("heads"))
    reason = case(*((condition(term, heads), literal(why.value) if why else null())
                    for term, why in BLOCKED_BY), else_=null())
    classified = select(heads, reason.label("reason")).cte("classified")
    later = messages.alias("later")
    waiting = (select(func.count())
               .where(condition(phase.ORDERED, later), later.c.state == State.SENT.value,
                      *(later.c[name] == classified.c[name] for name in ("app", "topic", "key")),
                      later.c.confirm_seq > classified.c.confirm_seq,
                      condition(phase.Not(phase.RESERVED), later))
               .scalar_subquery())
    blocked = (select(classified.c.topic, classified.c.key, classified.c.app,
                      classified.c.message_id, classified.c.reason, waiting.label("waiting"))
               .where(classified.c.reason.is_not(None)).subquery("blocked"))
    return (select(blocked)
            .where(or_(blocked.c.reason == Blocked.DEAD.value, blocked.c.waiting > 0))
            .order_by(blocked.c.app, blocked.c.topic, blocked.c.key)
            .limit(bindparam("limit")))


_BLOCKED_KEYS = _blocked_keys()



def encode_cursor(message: Message) -> str:
    return encode_key(message.created_at, message.message_id)


class AdminStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def search(self, where: MessageFilter, limit: int, cursor: str | None
                   ) -> tuple[list[Message], str | None]:
        statement: Select[Any] = select(messages).where(*message_clauses(where))
        if cursor is not None:
            after = decode_cursor(cursor)
            statement = statement.where(
                tuple_(messages.c.created_at, messages.c.message_id) > tuple_(*after))
        statement = statement.order_by(messages.c.created_at, messages.c.message_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement.limit(limit + 1))).all()
        found = [to_message(row) for row in rows[:limit]]
        next_cursor = encode_cursor(found[-1]) if len(rows) > limit else None
        return found, next_cursor

    async def stats(self) -> list[GroupCounts]:
        pending = and_(messages.c.state == State.PENDING_SEND.value, ~messages.c.dead)
        unacked = and_(messages.c.state == State.SENT.value, condition(phase.Not(phase.DEAD)))
        statement = (
            select(
                messages.c.app, messages.c.topic, messages.c.state,
                func.count().label("n"),
                func.count().filter(messages.c.dead).label("dead"),
                func.count().filter(unacked, _waiting()).label("scheduled"),
                _age(func.min(messages.c.created_at).filter(pending)).label("oldest_pending"),
                _age(func.min(_unacked_since()).filter(unacked, ~_waiting())
                     ).label("oldest_unacked"),
            )
            .group_by(messages.c.app, messages.c.topic, messages.c.state)
            .order_by(messages.c.app, messages.c.topic)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        return _group(list(rows))

    async def blocked_publishes(self) -> list[BlockedPublishes]:
        """One index lookup per unacked message (``message_events_message``)."""
        last = (select(message_events.c.event, message_events.c.detail)
                .where(message_events.c.message_id == messages.c.message_id)
                .order_by(message_events.c.id.desc()).limit(1).lateral("last_event"))
        reason = func.coalesce(last.c.detail["reason"].astext, "refused")
        statement = (
            select(messages.c.app, messages.c.topic, reason.label("reason"),
                   func.count().label("n"), _age(func.min(messages.c.confirmed_at)).label("age"))
            .select_from(messages.join(last, true()))
            .where(messages.c.state == State.SENT.value, ~messages.c.dead,
                   last.c.event == Event.PUBLISH_FAILED.value)
            .group_by(messages.c.app, messages.c.topic, reason)
            .order_by(messages.c.app, messages.c.topic)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        return [BlockedPublishes(row.app, row.topic, row.reason, row.n, row.age) for row in rows]

    async def blocked_keys(self, limit: int = 100) -> list[BlockedKey]:
        """Ordered keys held back by one of their messages, by topic and key."""
        async with self._engine.connect() as conn:
            rows = (await conn.execute(_BLOCKED_KEYS, {"limit": limit})).all()
        return [BlockedKey(row.topic, row.key, row.app, row.message_id, row.reason,
                           int(row.waiting)) for row in rows]

    async def oldest_ages(self) -> tuple[float | None, float | None]:
        """Ages of the oldest non-dead pending-send and unacked sent. Each reads every such
        message: its cost grows with the backlog."""
        statement = select(_oldest_pending().scalar_subquery(),
                           _oldest_unacked().scalar_subquery())
        async with self._engine.connect() as conn:
            row = (await conn.execute(statement)).one()
        return row[0], row[1]

    async def oldest_unacked(self) -> float | None:
        """Age of the oldest unacked sent message that is not dead (the second of
        :meth:`oldest_ages` alone)."""
        async with self._engine.connect() as conn:
            age: float | None = (await conn.execute(_oldest_unacked())).scalar()
        return age

    async def retention_figures(self) -> RetentionFigures:
        """What retention runs recorded (all zero before the first run)."""
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(retention_status))).first()
        if row is None:
            return RetentionFigures()
        return RetentionFigures(
            last_run_at=row.last_run_at, last_success_at=row.last_success_at,
            last_failure_at=row.last_failure_at, runs=row.runs_total,
            failures=row.failures_total, messages_removed=row.messages_removed_total,
            messages_archived=row.messages_archived_total,
            events_removed=row.events_removed_total)

    async def reachable(self) -> bool:
        """Whether the database answers a trivial query."""
        try:
            async with self._engine.connect() as conn:
                await conn.execute(select(1))
        except Exception:  # any failure means not reachable
            return False
        return True

    async def dead_candidates(self, where: MessageFilter, limit: int) -> list[Message]:
        """Dead ``sent`` messages, oldest first (the bulk resend's selection)."""
        statement = (
            select(messages)
            .where(messages.c.dead, messages.c.state == State.SENT.value, *message_clauses(where))
            .order_by(messages.c.created_at, messages.c.message_id)
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            return [to_message(row) for row in await conn.execute(statement)]


def _waiting() -> Any:
    """A delayed message whose time has not come: scheduled, not (yet) unacknowledged."""
    return condition(phase.SCHEDULED)


def _oldest_pending() -> Select[Any]:
    return (select(_age(func.min(messages.c.created_at)))
            .where(messages.c.state == State.PENDING_SEND.value, ~messages.c.dead))


def _oldest_unacked() -> Select[Any]:
    return (select(_age(func.min(_unacked_since())))
            .where(messages.c.state == State.SENT.value, condition(phase.Not(phase.DEAD)),
                   ~_waiting()))


def _unacked_since() -> Any:
    """When a sent message started waiting for its ack: its confirm, or its delivery time."""
    return func.greatest(messages.c.confirmed_at, messages.c.deliver_after)


def _age(moment: Any) -> Any:
    return func.extract("epoch", func.now() - moment)


def _group(rows: list[Any]) -> list[GroupCounts]:
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault((row.app, row.topic), {"counts": {}, "pending": None,
                                                         "unacked": None})
        counts = group["counts"]
        counts[row.state] = counts.get(row.state, 0) + row.n
        counts["dead"] = counts.get("dead", 0) + row.dead
        counts["scheduled"] = counts.get("scheduled", 0) + row.scheduled
        group["pending"] = _max(group["pending"], row.oldest_pending)
        group["unacked"] = _max(group["unacked"], row.oldest_unacked)
    return [
        GroupCounts(app, topic, g["counts"], g["pending"], g["unacked"])
        for (app, topic), g in groups.items()
    ]


def _max(a: Any, b: Any) -> float | None:
    values = [float(v) for v in (a, b) if v is not None]
    return max(values) if values else None
