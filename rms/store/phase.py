"""The delivery phase (:mod:`rms.domain.phase`) rendered as SQLAlchemy Core conditions on a
``messages`` row (the table, an alias of it, a CTE of its rows), and the same conditions as SQL
text for the constant statements (:func:`sql_text`: the Core condition compiled,
:mod:`rms.store.text_form`). The transition tables' conditional effects are these terms too
(:class:`rms.domain.transitions.When`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, and_, cast, exists, false, func, literal, not_, or_, select
from sqlalchemy.dialects.postgresql import JSONB

from rms.domain.phase import (
    Acked,
    All,
    AnyOf,
    ColumnTerm,
    EarlierMember,
    Equals,
    Exceeds,
    Flag,
    GivenTerm,
    HasEvent,
    LastEvent,
    Not,
    OthersAcked,
    Passed,
    Present,
    Reached,
    Same,
    Subscribed,
    Term,
)
from rms.domain.states import State
from rms.store.schema import message_events, messages
from rms.store.text_form import Prefixed, Row, given_text, text_of


def condition(term: Term, row: Row = messages,
              given: Mapping[str, Any] | None = None) -> ColumnElement[bool]:
    """``term`` as a condition on ``row``. A time predicate compares with ``now()`` plainly
    (``next_delivery_at <= now()`` keeps its index). ``given``: the Core expression of each
    value a :data:`GivenTerm` reads."""
    if isinstance(term, Not):
        return not_(condition(term.term, row, given))
    if isinstance(term, All):
        return and_(*(condition(t, row, given) for t in term.terms))
    if isinstance(term, AnyOf):
        return or_(*(condition(t, row, given) for t in term.terms))
    if isinstance(term, Subscribed | Acked | OthersAcked):
        return _of_consumer(term, row, _given(term, given))
    if isinstance(term, EarlierMember):
        return _earlier_member(term, row)
    if isinstance(term, HasEvent):
        return exists().where(message_events.c.message_id == row.c.message_id,
                              message_events.c.event == term.event.value)
    if isinstance(term, LastEvent):
        return _last_event(term, row)
    return _of_columns(term, row)


def _of_columns(term: ColumnTerm, row: Row) -> ColumnElement[bool]:
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
    if isinstance(term, Reached):
        return (c[term.column] - c[term.base]) >= c[term.limit]
    if isinstance(term, Passed):
        return c[term.column] <= func.now()
    return func.coalesce(c[term.column] > func.now(), false())


def _given(term: GivenTerm, given: Mapping[str, Any] | None) -> Any:
    if given is None or term.consumer not in given:
        raise ValueError(f"{term!r} needs the value {term.consumer!r} given")
    return given[term.consumer]


def _of_consumer(term: GivenTerm, row: Row, consumer: Any) -> ColumnElement[bool]:
    """A term on the row's subscribers and acks, for the ``consumer`` the statement names."""
    acks = func.coalesce(row.c.acks, cast(literal("{}"), JSONB))
    if isinstance(term, Subscribed):
        return func.coalesce(consumer == func.any(row.c.subscribers), false())
    if isinstance(term, Acked):
        return acks.bool_op("?")(consumer)
    return or_(row.c.subscribers.is_(None),
               acks.bool_op("?&")(func.array_remove(row.c.subscribers, consumer)))


def _earlier_member(term: EarlierMember, row: Row) -> ColumnElement[bool]:
    earlier = messages.alias("earlier")
    return exists().where(
        earlier.c.transaction_id == row.c.transaction_id,
        earlier.c.transaction_position < row.c.transaction_position,
        earlier.c.state == State.SENT.value,
        condition(term.term, earlier))


def _last_event(term: LastEvent, row: Row) -> ColumnElement[bool]:
    last: Any = (select(message_events.c.event)
                 .where(message_events.c.message_id == row.c.message_id)
                 .order_by(message_events.c.id.desc()).limit(1).scalar_subquery())
    matches: ColumnElement[bool] = last == term.event.value
    return matches


def sql_text(term: Term, row: str = "m.", given: Mapping[str, str] | None = None) -> str:
    """``term`` as SQL text: :func:`condition` compiled on the text statement's row, each column
    prefixed with ``row``. ``given``: the SQL text of each value a :data:`GivenTerm` reads."""
    if _relates_rows(term):
        raise ValueError(f"{term!r} relates several rows: it has no text form")
    return text_of(condition(term, Prefixed(row), given_text(dict(given or {}))))


def _relates_rows(term: Term) -> bool:
    if isinstance(term, Not):
        return _relates_rows(term.term)
    if isinstance(term, All | AnyOf):
        return any(_relates_rows(t) for t in term.terms)
    return isinstance(term, EarlierMember | HasEvent | LastEvent)
