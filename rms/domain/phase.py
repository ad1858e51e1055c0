"""The delivery phase of a ``sent`` message (design section 3, "Delivery phase"): whether its
delivery is reserved, in flight, due, scheduled for later or held back, each predicate defined
here once, as data.

The store renders a predicate into SQL (:mod:`rms.store.phase`) and Python evaluates it on a
:class:`~rms.domain.models.Message` (:func:`holds`), so the redelivery claim, the ordering
sequencer, the transaction's first publishes, the operator's blocked-keys view and the stats
all read the same definitions. Times are compared with the database clock: a Python
evaluation is given ``now`` as the statement that read the row saw it.

The columns behind the phase: ``delivery_count`` and ``delivery_base`` (deliveries reserved,
and that count when the current budget started), ``claim_token`` (the claim under which a
reserved delivery is being published), ``next_delivery_at`` (when the message is due: its ack
deadline, its retry time, its delivery time or the end of a claim's lease), ``deliver_after``
(a delayed message's time), ``published_delivery`` (the delivery the broker took, written only
by the statement that records an accepted publish), ``ordered`` and ``transaction_id`` /
``transaction_position``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rms.domain.models import Message
from rms.domain.states import Event


@dataclass(frozen=True, slots=True)
class Flag:
    """The row's boolean column ``column`` is true."""

    column: str


@dataclass(frozen=True, slots=True)
class Present:
    """The row's ``column`` is not NULL."""

    column: str


@dataclass(frozen=True, slots=True)
class Exceeds:
    """The row's ``column`` is greater than its ``other``."""

    column: str
    other: str


@dataclass(frozen=True, slots=True)
class Same:
    """The row's ``column`` equals its ``other`` (NULL: not)."""

    column: str
    other: str


@dataclass(frozen=True, slots=True)
class Equals:
    """The row's ``column`` equals the constant ``value``."""

    column: str
    value: int


@dataclass(frozen=True, slots=True)
class Reached:
    """The row's ``column`` less its ``base`` has reached its ``limit`` (three columns)."""

    column: str
    base: str
    limit: str


@dataclass(frozen=True, slots=True)
class Passed:
    """The row's time ``column`` has come (``<= now``; NULL: not)."""

    column: str


@dataclass(frozen=True, slots=True)
class Ahead:
    """The row's time ``column`` lies in the future (``> now``; NULL: not)."""

    column: str


@dataclass(frozen=True, slots=True)
class Not:
    term: Term


@dataclass(frozen=True, slots=True)
class All:
    terms: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    terms: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class EarlierMember:
    """An earlier ``sent`` message of the row's transaction for which ``term`` holds (a
    relation between rows: SQL only)."""

    term: Term


@dataclass(frozen=True, slots=True)
class HasEvent:
    """The row's history holds an ``event`` (SQL only)."""

    event: Event


@dataclass(frozen=True, slots=True)
class LastEvent:
    """The last event in the row's history is ``event`` (SQL only)."""

    event: Event


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The consumer the statement names (its given value ``consumer``) is a subscriber of the
    row."""

    consumer: str


@dataclass(frozen=True, slots=True)
class Acked:
    """The row's ``acks`` hold an ack of the consumer the statement names (its given value
    ``consumer``)."""

    consumer: str


@dataclass(frozen=True, slots=True)
class OthersAcked:
    """Every subscriber of the row other than the consumer the statement names (its given
    value ``consumer``) has acked; true for a row without subscribers (the single-ack rule).
    Read in Python from a row that carries the given value under ``consumer``."""

    consumer: str


Term = (Flag | Present | Exceeds | Same | Equals | Reached | Passed | Ahead | Not | All
        | AnyOf | EarlierMember | HasEvent | LastEvent | Subscribed | Acked | OthersAcked)
# the terms that read a value the statement supplies per row
GivenTerm = Subscribed | Acked | OthersAcked
# the terms on the row's own columns, which every form renders (SQL text, Core, Python)
ColumnTerm = Flag | Present | Exceeds | Same | Equals | Reached | Passed | Ahead


DEAD = Flag("dead")
ORDERED = Flag("ordered")
# the delivery budget is spent: the deliveries counted since the budget started have reached
# ``max_deliveries`` (the redelivery claim flags such a message dead instead of publishing it)
BUDGET_SPENT = Reached("delivery_count", "delivery_base", "max_deliveries")
# a delivery of the current budget is reserved: its publish is in flight or the broker accepted
# it (a refused publish gives its number back). A confirm, a one-shot send and the claims
# reserve one; a delayed message before its time and an ordered one get none at confirm.
RESERVED = Exceeds("delivery_count", "delivery_base")
# the delivery reserved is the message's first (counted across budgets)
FIRST_DELIVERY = Equals("delivery_count", 1)
# a delayed message (published at its ``deliver_after`` at the earliest)
DELAYED = Present("deliver_after")
# a claim holds the reserved delivery: a worker's round, the sequencer or the confirm of its
# transaction is publishing it and has not recorded the broker's answer yet (when the claim's
# lease, ``next_delivery_at``, runs out, the message is due again)
IN_FLIGHT = Present("claim_token")
# ``next_delivery_at`` came: its ack deadline passed, its publish retry or its delivery time
# came, or the lease of a claim on it ran out
DUE = Passed("next_delivery_at")
# a delayed message whose ``deliver_after`` has not come
SCHEDULED = Ahead("deliver_after")
# no live claim: none, or its lease ran out
FREE = AnyOf((Not(IN_FLIGHT), DUE))
# the first publish is outstanding: the broker never accepted a publish of the message. Read
# from its history, not from ``delivery_count``: an outcome that arrives after its claim's
# lease ran out (the message re-reserved meanwhile) is written as history only, so the count
# can stand above the publishes the broker took
UNPUBLISHED = Not(HasEvent(Event.PUBLISHED))
# behind an earlier message of its transaction whose first publish is outstanding: the
# messages of a transaction reach the broker for the first time in their order
HELD_FOR_ORDER = EarlierMember(UNPUBLISHED)
# due for a publish now (the redelivery claim takes it, or for an ordered one the sequencer)
READY = All((Not(DEAD), DUE, Not(HELD_FOR_ORDER)))
# may be claimed for a publish now, due or not (the ordering sequencer's claim of a key's run:
# a message waiting behind a blocked one goes as soon as the one before it was published):
# no live claim, not delayed past now, not held for its transaction's order
PUBLISHABLE = All((Not(DEAD), FREE, Not(SCHEDULED), Not(HELD_FOR_ORDER)))
# the broker took the delivery the row counts: its accepted publish is recorded in the row.
# Read from ``published_delivery``, never inferred from ``delivery_count``: an outcome that
# arrives after its claim's lease ran out is written as history only, so a count can stand for
# a delivery the broker never took
ACCEPTED = Same("published_delivery", "delivery_count")
# published and inside its ack deadline: the only phase in which a message of an ordered key
# lets the messages behind it go (the head-of-line rule). Every other message holds its line.
AWAITING_ACK = All((Not(DEAD), RESERVED, ACCEPTED, Not(IN_FLIGHT), Not(DUE)))
HOLDS_LINE = Not(AWAITING_ACK)
# due for its first publish of the budget, waiting for its turn behind the head of its key
QUEUED = All((Not(DEAD), Not(RESERVED), Not(IN_FLIGHT), DUE))


# several consumers per message (design section 3): the single-ack rule (no subscribers), an
# ack that counts (the acking consumer owes it, or the single-ack rule), and an ack that
# finishes the message (every other subscriber acked already)
SINGLE_ACK = Not(Present("subscribers"))
OWES = All((Subscribed("consumer"), Not(Acked("consumer"))))
ACK_COUNTS = AnyOf((SINGLE_ACK, OWES))
LAST_ACK = OthersAcked("consumer")
# an ack by an app that may consume the topic but was not a subscriber when it was confirmed
NOT_A_SUBSCRIBER = All((Not(SINGLE_ACK), Not(Subscribed("consumer"))))


# the columns of a message row the predicates read (with ``message_id`` for its history)
COLUMNS = ("message_id", "dead", "ordered", "delivery_count", "delivery_base", "max_deliveries",
           "claim_token", "next_delivery_at", "deliver_after", "published_delivery",
           "transaction_id",
           "transaction_position")


def holds(term: Term, message: Message, now: datetime | None = None) -> bool:
    """Whether ``term`` holds for ``message``; ``now`` (the database clock when the row was
    read) is needed by the time predicates."""
    return holds_on(term, _columns(message), now)


def holds_on(term: Term, row: Mapping[str, Any], now: datetime | None = None) -> bool:
    """Whether ``term`` holds for a row given as its columns by name."""
    return _holds(term, row, now)


def awaiting(message: Message) -> tuple[str, ...] | None:
    """The subscribers that owe ``message`` an ack (the term ``OWES`` for each), in order;
    None under the single-ack rule: the ``rms-awaiting`` header of its next record."""
    if message.subscribers is None:
        return None
    row = _columns(message)
    return tuple(name for name in message.subscribers
                 if holds_on(OWES, {**row, "consumer": name}))


def _columns(message: Message) -> Mapping[str, Any]:
    return {"dead": message.dead, "ordered": message.ordered,
            "delivery_count": message.delivery_count, "delivery_base": message.delivery_base,
            "max_deliveries": message.max_deliveries,
            "claim_token": message.claim_token, "next_delivery_at": message.next_delivery_at,
            "deliver_after": message.deliver_after,
            "published_delivery": message.published_delivery,
            "subscribers": message.subscribers, "acks": message.acks or None}


def _holds(term: Term, row: Mapping[str, Any], now: datetime | None) -> bool:
    if isinstance(term, Not):
        return not _holds(term.term, row, now)
    if isinstance(term, All):
        return all(_holds(t, row, now) for t in term.terms)
    if isinstance(term, AnyOf):
        return any(_holds(t, row, now) for t in term.terms)
    if isinstance(term, EarlierMember | HasEvent | LastEvent):
        raise ValueError(f"{term!r} relates several rows: it has no Python form")
    if isinstance(term, Subscribed | Acked | OthersAcked):
        return _holds_for_consumer(term, row)
    return _holds_on_columns(term, row, now)


def _holds_for_consumer(term: GivenTerm, row: Mapping[str, Any]) -> bool:
    """A consumer's term on a row whose columns come with the given value the term reads
    (the consumer's name under ``term.consumer``)."""
    consumer, subscribers = row[term.consumer], row["subscribers"]
    acks = row["acks"] or {}
    if isinstance(term, Subscribed):
        return subscribers is not None and consumer in subscribers
    if isinstance(term, Acked):
        return consumer in acks
    return subscribers is None or all(name in acks for name in subscribers if name != consumer)


def _holds_on_columns(term: ColumnTerm, row: Mapping[str, Any], now: datetime | None) -> bool:
    if isinstance(term, Flag):
        return bool(row[term.column])
    if isinstance(term, Present):
        return row[term.column] is not None
    if isinstance(term, Exceeds):
        return bool(row[term.column] > row[term.other])
    if isinstance(term, Same):
        return row[term.column] is not None and bool(row[term.column] == row[term.other])
    if isinstance(term, Equals):
        return bool(row[term.column] == term.value)
    if isinstance(term, Reached):
        return bool(row[term.column] - row[term.base] >= row[term.limit])
    return _timed(term, row[term.column], now)


def _timed(term: Passed | Ahead, at: datetime | None, now: datetime | None) -> bool:
    if now is None:
        raise ValueError(f"{term!r} needs the database clock")
    if at is None:
        return False
    return at <= now if isinstance(term, Passed) else at > now
