"""The delivery phase (rms.domain.phase): each predicate's SQL form (rms.store.phase) and its
Python form agree on stored rows in every combination of the columns they read."""

from __future__ import annotations

import itertools
from typing import Any

from sqlalchemy import func, insert, literal, select
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain.states import State
from rms.store.phase import condition
from rms.store.rows import to_message
from rms.store.schema import messages
from tests.support import Api


def _local(term: phase.Term) -> bool:
    """Whether ``term`` reads only the row's own columns (it has a Python form)."""
    if isinstance(term, phase.EarlierMember | phase.HasEvent | phase.LastEvent
                  | phase.Subscribed | phase.Acked | phase.OthersAcked):
        return False  # another row's, or a value the statement gives (the consumer's below)
    if isinstance(term, phase.Not):
        return _local(term.term)
    if isinstance(term, phase.All | phase.AnyOf):
        return all(_local(t) for t in term.terms)
    return True


NAMED = {name: term for name, term in vars(phase).items()
         if name.isupper() and isinstance(term, phase.Term) and _local(term)}
# the terms on a message's subscribers and acks, for the consumer a statement names
OF_CONSUMER: dict[str, phase.Term] = {"SINGLE_ACK": phase.SINGLE_ACK, "OWES": phase.OWES,
               "ACK_COUNTS": phase.ACK_COUNTS, "LAST_ACK": phase.LAST_ACK,
               "NOT_A_SUBSCRIBER": phase.NOT_A_SUBSCRIBER}
_ACK = {"at": "2026-11-28T00:00:00.000000Z", "via": "http"}


def _at(seconds: float | None) -> Any:
    return None if seconds is None else func.now() + func.make_interval(0, 0, 0, 0, 0, 0,
                                                                          seconds)


def _rows(app: str, topic: str, prefix: str) -> list[dict[str, Any]]:
    combinations = itertools.product(
        (False, True), (False, True), ((0, 0), (1, 0), (1, 1), (2, 1), (3, 1)), (None, "t"),
        (-60.0, 60.0), (None, -60.0, 60.0), (None, 1))
    return [
        {"message_id": f"{prefix}-{n}", "app": app, "topic": topic, "payload": {},
         "state": State.SENT.value, "check_after_seconds": 10.0, "max_checks": 3,
         "ack_timeout_seconds": 60.0, "max_deliveries": 6, "confirmed_at": func.now(),
         "dead": dead, "ordered": ordered, "delivery_count": count, "delivery_base": base,
         "claim_token": claim, "next_delivery_at": _at(due), "deliver_after": _at(after),
         "published_delivery": published}
        for n, (dead, ordered, (count, base), claim, due, after, published)
        in enumerate(combinations)]


async def test_each_predicate_reads_the_same_in_sql_and_in_python(
        api: Api, engine: AsyncEngine, topic: str, unique: str) -> None:
    app = await api.create_app("phases")
    rows = _rows(app.name, topic, unique)
    async with engine.begin() as conn:
        await conn.execute(insert(messages).values(rows))
        found = (await conn.execute(
            select(messages, func.now().label("read_at"),
                   *(condition(term).label(f"is_{name.lower()}") for name, term in NAMED.items()))
            .where(messages.c.message_id.startswith(unique)))).all()
    assert len(found) == len(rows)
    assert {"RESERVED", "ACCEPTED", "IN_FLIGHT", "DUE", "SCHEDULED", "HOLDS_LINE",
            "QUEUED"} <= set(NAMED)
    for row in found:
        message = to_message(row)
        for name, term in NAMED.items():
            sql = row._mapping[f"is_{name.lower()}"]
            assert phase.holds(term, message, row.read_at) == sql, (name, message)


async def test_each_consumer_predicate_reads_the_same_in_sql_and_in_python(
        api: Api, engine: AsyncEngine, topic: str, unique: str) -> None:
    app = await api.create_app("phases")
    combinations = list(itertools.product(
        (None, ["a"], ["a", "b"]), (None, {"a": _ACK}, {"a": _ACK, "b": _ACK}),
        ("a", "b", "c")))
    base = _rows(app.name, topic, unique)[0]
    rows = [base | {"message_id": f"{unique}-c{n}", "subscribers": subscribers, "acks": acks}
            for n, (subscribers, acks, _) in enumerate(combinations)]
    async with engine.begin() as conn:
        await conn.execute(insert(messages).values(rows))
        for (subscribers, acks, consumer), row in zip(combinations, rows, strict=True):
            given = {"consumer": literal(consumer)}
            found = (await conn.execute(
                select(*(condition(term, messages, given).label(name.lower())
                         for name, term in OF_CONSUMER.items()))
                .where(messages.c.message_id == row["message_id"]))).one()
            columns = {"subscribers": subscribers, "acks": acks, "consumer": consumer}
            for name, term in OF_CONSUMER.items():
                assert phase.holds_on(term, columns) == found._mapping[name.lower()], (
                    name, columns)
