"""Who a message's consumers are and who still owes an ack, in SQL: every statement that fixes
subscribers, checks an ack's permission or names the consumers owed reads these, and each is
the store's rendering of a term of the vocabulary (:mod:`rms.domain.phase`: ``OWES``), so that
the Python reading of a row (:func:`rms.domain.phase.awaiting`) cannot disagree with
them. Two forms stay outside the store: migration 0011's trigger and the Spark report
(:mod:`spark.consumers`); agreement tests tie them to these."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, case, false, func, literal_column, null, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.sql.expression import FromClause

from rms.domain import phase
from rms.store.phase import condition
from rms.store.schema import apps
from rms.store.text_form import Prefixed, Row, text_of


def consumes(topic: ColumnElement[Any], app: Row = apps) -> ColumnElement[bool]:
    """An app (a row of ``apps``, or of ``app``) consumes ``topic``: its ``consume_topics``
    match it, read from its regex while the regex is the one of its current topics."""
    return and_(topic.op("~")(app.c.consume_regex),
                app.c.consume_regex_of == app.c.consume_topics)


def consumes_sql(topic: str, app: str = "a") -> str:
    """:func:`consumes` as SQL text: ``topic`` and the app row ``app`` as a text statement
    names them."""
    return text_of(consumes(literal_column(topic), Prefixed(f"{app}.")))


def subscribers(topic: ColumnElement[Any]) -> ColumnElement[Any]:
    """The apps that consume ``topic``, sorted; NULL when none (the subscribers a confirm
    fixes)."""
    return (select(func.array_agg(aggregate_order_by(apps.c.name, apps.c.name)))
            .where(consumes(topic)).scalar_subquery())


def owed_setting(topic: ColumnElement[Any], own: ColumnElement[Any],
                 name: str) -> ColumnElement[Any]:
    """The delivery setting ``name`` the apps that consume ``topic`` are owed: the largest of
    each one's own (``apps.<name>``) or ``own`` (the message's) for one without; ``own`` when
    no app consumes ``topic`` (design section 7)."""
    largest = (select(func.max(func.coalesce(apps.c[name], own)))
               .where(consumes(topic)).scalar_subquery())
    return func.coalesce(largest, own)


def owing(row: FromClause) -> ColumnElement[Any]:
    """The subscribers of ``row`` that owe it an ack (the term ``OWES`` for each), sorted;
    NULL under the single-ack rule, and when none owes."""
    name = func.unnest(row.c.subscribers).column_valued("consumer")
    return (select(func.array_agg(aggregate_order_by(name, name)))
            .where(condition(phase.OWES, row, {"consumer": name}))
            .scalar_subquery())


def several(row: FromClause) -> ColumnElement[bool]:
    """``row`` has several subscribers: only then can one's own delivery budget be smaller
    than the message's (a single subscriber's is the message's, fixed at its confirm)."""
    return func.coalesce(func.cardinality(row.c.subscribers) > 1, false())


def spent_for(row: FromClause) -> ColumnElement[Any]:
    """The subscribers of ``row`` that owe it an ack and whose own delivery budget is spent,
    sorted; NULL when none (design section 7): their app's ``max_deliveries`` (the message's
    for an app without one) reached by the deliveries since the budget (re)started. Looked
    up only for a message of :func:`several` subscribers."""
    name = func.unnest(row.c.subscribers).column_valued("consumer")
    own = select(apps.c.max_deliveries).where(apps.c.name == name).scalar_subquery()
    spent = (select(func.array_agg(aggregate_order_by(name, name)))
             .where(condition(phase.OWES, row, {"consumer": name}),
                    func.coalesce(own, row.c.max_deliveries)
                    <= row.c.delivery_count - row.c.delivery_base)
             .scalar_subquery())
    return case((several(row), spent), else_=null())


def every_owing_spent(row: FromClause) -> ColumnElement[bool]:
    """Every subscriber of ``row`` that owes it an ack spent its own delivery budget (false
    for a message of fewer than :func:`several` subscribers)."""
    return case((several(row), func.coalesce(owing(row).op("<@")(spent_for(row)), false())),
                else_=false())
