"""The transition tables rendered as SQL: SQLAlchemy values for the statements built with Core,
and the same values compiled to SQL text for the constant statements of the coalesced request
path (:mod:`rms.store.text_form`). Each effect has one rendering, so the forms cannot drift
apart. The renderer takes the table
it writes as a parameter: the messages' table (:mod:`rms.domain.transitions`) and the
transactions' (:mod:`rms.domain.transaction_transitions`) are rendered alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import orjson
from sqlalchemy import (
    CTE,
    ColumnElement,
    Select,
    Table,
    case,
    cast,
    func,
    literal,
    select,
    union_all,
)
from sqlalchemy.dialects.postgresql import JSONB

from rms.domain import phase
from rms.domain.states import Event
from rms.domain.transitions import (
    AckAdded,
    Column,
    Effect,
    Given,
    Later,
    NextInSequence,
    Now,
    OwedSetting,
    Plus,
    Subscribers,
    Transition,
    When,
)
from rms.store.phase import condition, sql_text
from rms.store.schema import message_events, messages
from rms.store.subscriptions.terms import owed_setting, subscribers
from rms.store.text_form import Prefixed, given_text, text_of
from rms.store.text_form import Row as RowColumns

Detail = Mapping[str, Any] | Any  # a fixed detail, or a callable from the changed CTE


def seconds(value: Any) -> ColumnElement[Any]:
    """``value`` seconds as an interval (database clock arithmetic)."""
    return func.make_interval(0, 0, 0, 0, 0, 0, value)


class Changes(Protocol):
    """A row of a transition table, as the renderer reads it: its column effects."""

    @property
    def effects(self) -> Mapping[str, Effect]: ...


def core_values(change: Changes, given: Mapping[str, Any] | None = None,
                target: Table = messages) -> dict[str, Any]:
    """The effects as ``UPDATE <target> ... VALUES`` arguments (``target``: the table the row
    belongs to, messages unless told); ``given`` supplies each :class:`Given` value as a Core
    expression."""
    supplied = given or {}
    return {name: _core(effect, supplied, target) for name, effect in change.effects.items()}


def _core(effect: Effect, given: Mapping[str, Any], target: RowColumns) -> Any:
    if isinstance(effect, Now):
        return func.now()
    if isinstance(effect, Column):
        return target.c[effect.name]
    if isinstance(effect, Given):
        return _supplied(given, effect.name)
    if isinstance(effect, Plus):
        return target.c[effect.name] + effect.by
    if isinstance(effect, Later):
        return func.now() + seconds(_core(effect.seconds, given, target))
    if isinstance(effect, NextInSequence):
        return func.nextval(effect.name)
    if isinstance(effect, When):
        return case((condition(effect.term, target, given), _core(effect.then, given, target)),
                    else_=_core(effect.otherwise, given, target))
    if isinstance(effect, Subscribers | OwedSetting):
        return _subscription(effect, target)
    if isinstance(effect, AckAdded):
        entry = func.jsonb_build_object(_supplied(given, effect.consumer), func.jsonb_build_object(
            "at", func.to_char(func.timezone("UTC", func.now()), literal(_RFC3339)),
            "via", _supplied(given, effect.via)))
        return func.coalesce(target.c.acks, cast(literal("{}"), JSONB)).op("||")(entry)
    return effect


def _subscription(effect: Subscribers | OwedSetting, target: RowColumns) -> Any:
    """What the apps consuming the row's topic say: its subscribers, or a setting they are
    owed."""
    if isinstance(effect, Subscribers):
        return subscribers(target.c.topic)
    return owed_setting(target.c.topic, target.c[effect.name], effect.name)


def _supplied(given: Mapping[str, Any], name: str) -> Any:
    if name not in given:
        raise ValueError(f"no value given for {name!r}")
    return given[name]


# the database clock as RFC 3339 UTC text (an ack's time in ``acks``)
_RFC3339 = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'


def set_sql(change: Changes, row: str = "m.", given: Mapping[str, str] | None = None) -> str:
    """The effects as the SET clause of ``UPDATE messages m`` (``row`` prefixes the row's own
    columns; ``given`` supplies each :class:`Given` value as SQL text). The conditional effects
    of several columns on one term are set together, the term computed once per row, on the
    row before the change like every other effect::

        (state, done_at) = (SELECT CASE WHEN last_ack.holds THEN ... END, ...
                            FROM (SELECT <the term>) AS last_ack(holds))
    """
    shared = _shared_terms(change.effects)
    assignments = [f"{name} = {sql_of(effect, row, given)}"
                   for name, effect in change.effects.items()
                   if not (isinstance(effect, When) and effect.term in shared)]
    for term in shared:
        conditional = {name: effect for name, effect in change.effects.items()
                       if isinstance(effect, When) and effect.term == term}
        alias = term_name(term).lower()
        values = ", ".join(
            f"CASE WHEN {alias}.holds THEN {sql_of(effect.then, row, given)} "
            f"ELSE {sql_of(effect.otherwise, row, given)} END"
            for effect in conditional.values())
        assignments.append(f"({', '.join(conditional)}) = (SELECT {values} FROM "
                           f"(SELECT {sql_text(term, row, given)}) AS {alias}(holds))")
    return ", ".join(assignments)


def _shared_terms(effects: Mapping[str, Effect]) -> list[phase.Term]:
    """The terms that two or more conditional effects read, in the order they first appear."""
    terms = [effect.term for effect in effects.values() if isinstance(effect, When)]
    return list(dict.fromkeys(term for term in terms if terms.count(term) > 1))


def term_name(term: phase.Term) -> str:
    """The name :mod:`rms.domain.phase` gives ``term`` (``LAST_ACK``), or ``TERM`` for one it
    does not name."""
    return next((name for name, value in vars(phase).items()
                 if name.isupper() and value == term), "TERM")


def sql_of(effect: Effect, row: str = "m.", given: Mapping[str, str] | None = None) -> str:
    """One effect as SQL text: its Core form compiled on the text statement's row, each column
    prefixed with ``row``; each :class:`Given` value is the SQL text ``given`` names for it."""
    return text_of(_core(effect, given_text(dict(given or {})), Prefixed(row)))


def event_of(change: Transition) -> Event:
    """The event ``change`` appends (a transition without one is written by a statement that
    appends its own)."""
    if change.event is None:
        raise ValueError(f"{change.action} appends no event of its own")
    return change.event


def jsonb(value: Mapping[str, Any]) -> ColumnElement[Any]:
    """A constant JSON object as ``jsonb``: its text is bound as plain text and cast by
    PostgreSQL, so a statement run on the driver connection needs no Core bind processing."""
    return cast(literal(orjson.dumps(dict(value)).decode()), JSONB)


def with_event(changed: CTE, event: Event, actor: str, detail: Detail, *,
               reserves: bool = False) -> Select[Any]:
    """``SELECT * FROM changed`` that also appends one event per changed row, and when the
    transition ``reserves`` a delivery, after it the ``publishing`` event of each row that got
    one (:func:`publishing_events`): one insert, its rows numbered in that order."""
    detail_sql = detail(changed) if callable(detail) else jsonb(detail)
    rows = select(changed.c.message_id, literal(event.value).label("event"),
                  literal(actor).label("actor"), detail_sql.label("detail"),
                  literal(0).label("ord"))
    if reserves:
        rows = union_all(rows, publishing_events(changed, literal(actor)))  # type: ignore[assignment]
    ordered = rows.subquery("appended")
    history = message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(ordered.c.message_id, ordered.c.event, ordered.c.actor, ordered.c.detail)
        .order_by(ordered.c.message_id, ordered.c.ord),
    ).cte(f"history_{event.name.lower()}")
    return select(changed).add_cte(history)


def publishing_events(changed: CTE, actor: ColumnElement[Any]) -> Select[Any]:
    """The ``publishing`` event (columns ``message_id, event, actor, detail, ord``) of each row
    of ``changed`` that has a delivery reserved (:data:`rms.domain.phase.RESERVED`): appended by
    the statement that reserved it, after its own event, before the publish and so before any
    ack of it; the broker's answer completes it in place (:mod:`rms.store.dispatch`)."""
    return (select(changed.c.message_id, literal(Event.PUBLISHING.value).label("event"),
                   actor.label("actor"),
                   func.jsonb_build_object("delivery", changed.c.delivery_count).label("detail"),
                   literal(1).label("ord"))
            .where(condition(phase.RESERVED, changed)))


def append_publishing(changed: CTE, actor: ColumnElement[Any]) -> CTE:
    """The insert of :func:`publishing_events` alone, for a statement whose rows get no other
    event (the redelivery claim)."""
    rows = publishing_events(changed, actor).subquery("reserved")
    return message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(rows.c.message_id, rows.c.event, rows.c.actor, rows.c.detail),
    ).cte("history_publishing")


def publishing_sql(source: str, actor: str) -> str:
    """:func:`publishing_events` as the ``SELECT`` of a text statement's history insert: over
    ``source``, the rows a reserving statement returned, with ``actor`` the SQL of each row's
    actor."""
    return (f"SELECT message_id, '{Event.PUBLISHING.value}', {actor}, "
            f"jsonb_build_object('delivery', delivery_count) FROM {source} "
            f"WHERE {sql_text(phase.RESERVED, '')}")


def delivery_detail(changed: CTE) -> ColumnElement[Any]:
    """``{"delivery": n}`` from the changed row: the number a resend reserved, or for an
    ordered message (:data:`rms.domain.phase.ORDERED`, which the sequencer publishes later)
    the number it will publish."""
    upcoming = case((condition(phase.ORDERED, changed), changed.c.delivery_count + 1),
                    else_=changed.c.delivery_count)
    return func.jsonb_build_object("delivery", upcoming)
