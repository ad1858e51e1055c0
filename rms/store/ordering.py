"""Per-key ordering's SQL (the ordering sequencer's): key leases, a key's queue in confirm order, the
claim of one message under the key's lease, and the holding back of the messages behind a
blocked one.

A key is ``(app, topic, key)``: no app holds another's keys. The records of one key go to one
partition of the topic, so their order there is the order RMS hands them to its (idempotent)
producer. Only the worker holding
a key's lease (a row of ``ordering_keys``, taken with ``FOR UPDATE SKIP LOCKED``, held until
``lease_until`` and removed when released) publishes that key; every claim re-checks the lease
in the same statement, so a worker whose lease ran out publishes nothing more of the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ARRAY,
    CTE,
    Select,
    Text,
    and_,
    any_,
    bindparam,
    delete,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain import phase
from rms.domain.models import Message
from rms.domain.ordering import Queued
from rms.domain.states import Event, State
from rms.domain.transitions import HOLD_IN_LINE, RELEASE_DELIVERY
from rms.store.claims import Round, budget_columns, delivery_claim, locked
from rms.store.phase import condition
from rms.store.raw import RawStatement
from rms.store.rows import to_message
from rms.store.schema import message_events, messages, ordering_keys
from rms.store.transitions import core_values, seconds

# why a reserved delivery was given back unattempted: an earlier message of its key's run
# was not published, so this one may not go before it
WITHDRAWN_REASON = "run-stopped"

_KEY = (messages.c.app, messages.c.topic, messages.c.key)


def _of_key(row: Any) -> Any:
    """``messages`` rows of the key of ``row`` (a row with ``app``, ``topic``, ``key``)."""
    return and_(*(column == row.c[column.name] for column in _KEY))


def _due_keys() -> Select[Any]:
    """The keys of the ``:scan`` ordered messages due longest (a message held for the order of
    its transaction does not make its key due: the claim would not take it)."""
    due = (select(*_KEY)
           .where(condition(phase.ORDERED), messages.c.state == State.SENT.value,
                  condition(phase.READY))
           .order_by(messages.c.next_delivery_at).limit(bindparam("scan")).subquery("due"))
    return select(due.c.app, due.c.topic, due.c.key).distinct()


_ADD_KEYS = insert(ordering_keys).from_select(
    ["app", "topic", "key"], _due_keys()).on_conflict_do_nothing()


def _lease_keys() -> Any:
    due: CTE = _due_keys().cte("due")
    leasable = (
        select(ordering_keys.c.app, ordering_keys.c.topic, ordering_keys.c.key)
        .select_from(ordering_keys.join(due, and_(*(
            ordering_keys.c[name] == due.c[name] for name in ("app", "topic", "key")))))
        .where(or_(ordering_keys.c.lease_until.is_(None),
                   ordering_keys.c.lease_until <= func.now()))
        .limit(bindparam("limit")))
    chosen = locked(leasable, "chosen", of=ordering_keys)
    return (update(ordering_keys)
            .where(*(ordering_keys.c[name] == chosen.c[name] for name in ("app", "topic", "key")))
            .values(lease_token=bindparam("token"),
                    lease_until=func.now() + seconds(bindparam("lease")))
            .returning(ordering_keys.c.app, ordering_keys.c.topic, ordering_keys.c.key))


_LEASE_KEYS = _lease_keys()


def _queues() -> Select[Any]:
    """The unacknowledged messages of every key a round leased, in confirm order, at most
    ``:limit`` per key, with the database clock (index messages_ordered_keys)."""
    place = func.row_number().over(partition_by=_KEY, order_by=messages.c.confirm_seq)
    queued = (
        select(messages, func.now().label("read_at"), place.label("place"))
        .select_from(messages.join(ordering_keys, _of_key(ordering_keys)))
        .where(ordering_keys.c.lease_token == bindparam("token"), condition(phase.ORDERED),
               messages.c.state == State.SENT.value)
        .subquery("queued"))
    return (select(queued).where(queued.c.place <= bindparam("limit"))
            .order_by(queued.c.app, queued.c.topic, queued.c.key, queued.c.confirm_seq))


_QUEUES = _queues()

def _behind(which: phase.Term, delay: Any) -> Any:
    """The ordered ``sent`` messages of the key ``:of_app``/``:of_topic``/``:of_key`` queued
    after ``:after`` for which ``which`` holds: looked at again after ``delay`` seconds."""
    return (update(messages)
            .where(condition(phase.ORDERED), messages.c.state == HOLD_IN_LINE.source.value,
                   condition(which), messages.c.app == bindparam("of_app"),
                   messages.c.topic == bindparam("of_topic"),
                   messages.c.key == bindparam("of_key"),
                   messages.c.confirm_seq > bindparam("after"))
            .values(**core_values(HOLD_IN_LINE, {"delay": delay})))


# the messages queued behind a blocked one: looked at again after :delay seconds instead of at
# every tick
_HOLD = _behind(phase.QUEUED, bindparam("delay"))
# the messages behind a key's head once the head was accepted after refusals: due at once
# (those held back by :data:`_HOLD` are not due; a delayed one keeps its delivery time)
_CLEAR = _behind(phase.All((phase.Not(phase.DEAD), phase.Not(phase.RESERVED),
                            phase.Not(phase.IN_FLIGHT), phase.Not(phase.SCHEDULED))), 0.0)

# a key's row lives while the key is worked on: releasing the round's leases removes them
_RELEASE = delete(ordering_keys).where(ordering_keys.c.lease_token == bindparam("token"))


@dataclass(frozen=True, slots=True)
class Key:
    app: str
    topic: str
    key: str

    @classmethod
    def of(cls, message: Message) -> Key:
        return cls(message.app, message.topic, message.key or "")


def _claim_run(token: str, lease_seconds: float, actor: str) -> Any:
    """Claim (or flag dead, when its budget is spent) the ordered messages ``run_ids`` (the
    runs of a round's keys), each only while its key's lease ``key_token`` is held and, for a
    message of a transaction, only once every earlier message of its transaction had a
    publish accepted (as the redelivery claim: :func:`rms.store.claims.delivery_claim`)."""
    leased = exists().where(
        _of_key(ordering_keys), ordering_keys.c.lease_token == bindparam("key_token"),
        ordering_keys.c.lease_until > func.now())
    # not necessarily due: a message waiting behind a blocked one goes as soon as the one
    # before it was published (the run stops at a message the claim does not take, and the
    # key waits behind it, as behind a failed publish)
    chosen: Select[Any] = select(messages.c.message_id, *budget_columns()).where(
        messages.c.message_id == any_(bindparam("run_ids", type_=ARRAY(Text))),
        condition(phase.ORDERED), messages.c.state == State.SENT.value,
        condition(phase.PUBLISHABLE), leased)
    return delivery_claim(chosen, token, lease_seconds, actor)


class OrderingStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._claims: dict[tuple[float, str], RawStatement] = {}

    async def lease_keys(self, *, limit: int, token: str, lease_seconds: float) -> list[Key]:
        """Lease up to ``limit`` keys that have a due ordered message and no live lease."""
        scan = max(limit * 20, 1000)
        async with self._engine.connect() as conn:
            await conn.execute(_ADD_KEYS, {"scan": scan})
            rows = await conn.execute(_LEASE_KEYS, {"scan": scan, "limit": limit,
                                                    "token": token, "lease": lease_seconds})
            return [Key(row.app, row.topic, row.key) for row in rows]

    async def queues(self, token: str, limit: int) -> dict[Key, list[Queued]]:
        """The unacknowledged (``sent``) ordered messages of every key leased with ``token``,
        in confirm order, at most ``limit`` per key."""
        found: dict[Key, list[Queued]] = {}
        async with self._engine.connect() as conn:
            for row in await conn.execute(_QUEUES, {"token": token, "limit": limit}):
                found.setdefault(Key(row.app, row.topic, row.key), []).append(
                    Queued(to_message(row), row.read_at))
        return found

    async def claim_run(self, message_ids: Sequence[str], *, key_token: str, token: str,
                        lease_seconds: float, actor: str) -> Round:
        """Reserve the next delivery of each message of the runs of the leased keys (or flag it
        dead): one statement per round."""
        statement = self._claims.get((lease_seconds, actor))
        if statement is None:
            statement = RawStatement(_claim_run("", lease_seconds, actor), self._engine.dialect)
            self._claims[(lease_seconds, actor)] = statement
        return Round.of(await statement.fetch(self._engine, round_token=token,
                                              run_ids=list(message_ids), key_token=key_token))

    async def give_back(self, claimed: Sequence[Message]) -> None:
        """Give back the reserved deliveries of claimed messages that were not published
        (guarded by each claim's token and number). The ``publishing`` event each claim
        appended is completed where it stands as ``withdrawn``: the history keeps the
        reservation and says that no publish of it was attempted."""
        for message in claimed:
            released = (
                update(messages)
                .where(messages.c.message_id == message.message_id,
                       messages.c.state == RELEASE_DELIVERY.source.value,
                       messages.c.claim_token == message.claim_token,
                       messages.c.delivery_count == message.delivery_count)
                .values(**core_values(RELEASE_DELIVERY))
                .returning(messages.c.message_id).cte("released"))
            withdrawn = (
                update(message_events)
                .where(message_events.c.message_id.in_(select(released.c.message_id)),
                       message_events.c.event == Event.PUBLISHING.value,
                       message_events.c.detail["delivery"].astext
                       == str(message.delivery_count))
                .values(event=Event.WITHDRAWN.value,
                        detail=func.jsonb_build_object("delivery", message.delivery_count,
                                                       "reason", WITHDRAWN_REASON)))
            async with self._engine.connect() as conn:
                await conn.execute(withdrawn.add_cte(released))

    async def hold_behind(self, key: Key, confirm_seq: int, delay_seconds: float) -> int:
        """Look at the due messages queued behind ``confirm_seq`` again in ``delay_seconds``."""
        return await self._behind(_HOLD, key, confirm_seq, delay=delay_seconds)

    async def clear_behind(self, key: Key, confirm_seq: int) -> int:
        """Make the messages queued behind ``confirm_seq`` due now (its key is clear again)."""
        return await self._behind(_CLEAR, key, confirm_seq)

    async def _behind(self, statement: Any, key: Key, confirm_seq: int, **params: Any) -> int:
        async with self._engine.connect() as conn:
            result = await conn.execute(statement, {"of_app": key.app, "of_topic": key.topic,
                                                    "of_key": key.key, "after": confirm_seq,
                                                    **params})
            return int(getattr(result, "rowcount", 0) or 0)

    async def release(self, token: str) -> None:
        """Release every key leased with ``token``."""
        async with self._engine.connect() as conn:
            await conn.execute(_RELEASE, {"token": token})
