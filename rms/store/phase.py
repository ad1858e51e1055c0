"""The delivery phase (:mod:`rms.domain.phase`) rendered as SQLAlchemy Core conditions on a
``messages`` row (the table, or an alias of it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, exists, false, func, not_, or_, select
from sqlalchemy.sql.expression import FromClause

from rms.domain.phase import (
    Ahead,
    All,
    AnyOf,
    EarlierMember,
    Equals,
    Exceeds,
    Flag,
    HasEvent,
    LastEvent,
    Not,
    Passed,
    Present,
    Same,
    Term,
)
from rms.domain.states import State
from rms.store.schema import message_events, messages


def condition(term: Term, row: FromClause = messages) -> ColumnElement[bool]:
    """``term`` as a condition on ``row``. A time predicate compares with ``now()`` plainly
    (``next_delivery_at <= now()`` keeps its index)."""
    if isinstance(term, Not):
        return not_(condition(term.term, row))
    if isinstance(term, All):
        return and_(*(condition(t, row) for t in term.terms))
    if isinstance(term, AnyOf):
        return or_(*(condition(t, row) for t in term.terms))
    if isinstance(term, EarlierMember):
        return _earlier_member(term, row)
    if isinstance(term, HasEvent):
        return exists().where(message_events.c.message_id == row.c.message_id,
                              message_events.c.event == term.event.value)
    if isinstance(term, LastEvent):
        return _last_event(term, row)
    return _of_columns(term, row)


def _of_columns(term: Flag | Present | Exceeds | Same | Equals | Passed | Ahead,
                row: FromClause
                ) -> ColumnElement[bool]:
    """A predicate on the row's own columns."""
    c = row.c
    if isinstance(term, Flag):
        column: ColumnElement[bool] = c[term.column]
        return column
    if isinstance(term, Present):
        return c[term.column].is_not(None)
    if isinstance(term, Exceeds):
        return c[term.column] > c[term.other]
    if isinstance(term, Same):
        return func.coalesce(c[term.column] == c[term.other], false())
    if isinstance(term, Equals):
        return c[term.column] == term.value
    if isinstance(term, Passed):
        return c[term.column] <= func.now()
    return func.coalesce(c[term.column] > func.now(), false())


def _earlier_member(term: EarlierMember, row: FromClause) -> ColumnElement[bool]:
    earlier = messages.alias("earlier")
    return exists().where(
        earlier.c.transaction_id == row.c.transaction_id,
        earlier.c.transaction_position < row.c.transaction_position,
        earlier.c.state == State.SENT.value,
        condition(term.term, earlier))


def _last_event(term: LastEvent, row: FromClause) -> ColumnElement[bool]:
    last: Any = (select(message_events.c.event)
                 .where(message_events.c.message_id == row.c.message_id)
                 .order_by(message_events.c.id.desc()).limit(1).scalar_subquery())
    matches: ColumnElement[bool] = last == term.event.value
    return matches
