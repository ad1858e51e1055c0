"""The sequencer's SQL (per-key ordering): key leases, a key's queue in confirm order, the
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

from sqlalchemy import ARRAY, Select, Text, any_, bindparam, exists, func, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.domain.models import Message
from rms.domain.ordering import Queued
from rms.domain.states import State
from rms.domain.transitions import RELEASE_DELIVERY
from rms.store.raw import RawStatement
from rms.store.redeliveries import Round, behind_unpublished, claim_statement, spent_budget
from rms.store.rows import message_from, to_message
from rms.store.schema import messages, ordering_keys
from rms.store.transitions import core_values

# a due message waiting for an earlier message of its transaction (never published, or its
# publish in flight) does not make its key due: the claim would not take it
_DUE_KEYS = """
SELECT DISTINCT app, topic, key FROM (
    SELECT m.app, m.topic, m.key FROM messages m
    WHERE m.ordered AND m.state = 'sent' AND NOT m.dead AND m.next_delivery_at <= now()
      AND NOT EXISTS (
          SELECT 1 FROM messages e
          WHERE m.transaction_id IS NOT NULL AND e.transaction_id = m.transaction_id
            AND e.transaction_position < m.transaction_position AND e.state = 'sent'
            AND (e.delivery_count = 0 OR e.claim_token IS NOT NULL))
    ORDER BY m.next_delivery_at
    LIMIT :scan
) AS due
"""

_ADD_KEYS = text(f"""
INSERT INTO ordering_keys (app, topic, key)
{_DUE_KEYS}
ON CONFLICT DO NOTHING
""")

_LEASE_KEYS = text(f"""
WITH due AS ({_DUE_KEYS}
), chosen AS MATERIALIZED (
    SELECT k.app, k.topic, k.key FROM ordering_keys k
    JOIN due d ON d.app = k.app AND d.topic = k.topic AND d.key = k.key
    WHERE k.lease_until IS NULL OR k.lease_until <= now()
    LIMIT :limit
    FOR UPDATE OF k SKIP LOCKED
)
UPDATE ordering_keys k
SET lease_token = :token, lease_until = now() + make_interval(secs => :lease)
FROM chosen c
WHERE k.app = c.app AND k.topic = c.topic AND k.key = c.key
RETURNING k.app, k.topic, k.key
""")

# the unacknowledged messages of every key a round leased, in confirm order, at most :limit
# per key (index messages_ordered_keys)
_QUEUES = text("""
SELECT * FROM (
    SELECT m.*, m.next_delivery_at <= now() AS due,
           coalesce(m.deliver_after > now(), false) AS scheduled,
           row_number() OVER (PARTITION BY m.app, m.topic, m.key ORDER BY m.confirm_seq)
               AS place
    FROM messages m
    JOIN ordering_keys k ON k.app = m.app AND k.topic = m.topic AND k.key = m.key
    WHERE k.lease_token = :token AND m.ordered AND m.state = 'sent'
) AS queued
WHERE place <= :limit
ORDER BY app, topic, key, confirm_seq
""")

# the messages waiting behind a blocked one (never published, not in flight, due): looked at
# again after :delay seconds instead of at every tick
_HOLD = text("""
UPDATE messages
SET next_delivery_at = now() + make_interval(secs => :delay)
WHERE ordered AND state = 'sent' AND NOT dead AND app = :app AND topic = :topic AND key = :key
  AND confirm_seq > :after AND delivery_count = delivery_base AND claim_token IS NULL
  AND next_delivery_at <= now()
""")

# a key's row lives while the key is worked on: releasing the round's leases removes them
_RELEASE = text("DELETE FROM ordering_keys WHERE lease_token = :token")


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
    publish accepted (as the recovery claim)."""
    leased = exists().where(
        ordering_keys.c.app == messages.c.app, ordering_keys.c.topic == messages.c.topic,
        ordering_keys.c.key == messages.c.key,
        ordering_keys.c.lease_token == bindparam("key_token"),
        ordering_keys.c.lease_until > func.now())
    # not necessarily due: a message waiting behind a blocked one goes as soon as the one
    # before it was published; never one another claim holds and whose lease still runs, nor
    # a delayed message before its deliver_after (database clock), nor a message of a
    # transaction whose earlier message has not reached the broker yet (the run stops there
    # and the key waits behind it, as behind a failed publish)
    free = or_(messages.c.claim_token.is_(None), messages.c.next_delivery_at <= func.now())
    deliverable = or_(messages.c.deliver_after.is_(None), messages.c.deliver_after <= func.now())
    chosen: Select[Any] = select(messages.c.message_id, spent_budget().label("spent")).where(
        messages.c.message_id == any_(bindparam("run_ids", type_=ARRAY(Text))),
        messages.c.ordered,
        messages.c.state == State.SENT.value, ~messages.c.dead, free, leased, deliverable,
        ~behind_unpublished())
    return claim_statement(chosen, token, lease_seconds, actor)


class SequencingStore:
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
                    Queued(to_message(row), bool(row.due), bool(row.scheduled)))
        return found

    async def claim_run(self, message_ids: Sequence[str], *, key_token: str, token: str,
                        lease_seconds: float, actor: str) -> Round:
        """Reserve the next delivery of each message of the runs of the leased keys (or flag it
        dead): one statement per round."""
        statement = self._claims.get((lease_seconds, actor))
        if statement is None:
            statement = RawStatement(_claim_run("", lease_seconds, actor), self._engine.dialect)
            self._claims[(lease_seconds, actor)] = statement
        rows = await statement.fetch(self._engine, round_token=token,
                                     run_ids=list(message_ids), key_token=key_token)
        found = [(row["flagged_dead"], message_from(row)) for row in rows]
        return Round(dead=[m for dead, m in found if dead],
                     claimed=[m for dead, m in found if not dead])

    async def give_back(self, claimed: Sequence[Message]) -> None:
        """Give back the reserved deliveries of claimed messages that were not published
        (guarded by each claim's token and number)."""
        for message in claimed:
            statement = (
                update(messages)
                .where(messages.c.message_id == message.message_id,
                       messages.c.state == RELEASE_DELIVERY.source.value,
                       messages.c.claim_token == message.claim_token,
                       messages.c.delivery_count == message.delivery_count)
                .values(**core_values(RELEASE_DELIVERY)))
            async with self._engine.connect() as conn:
                await conn.execute(statement)

    async def hold_behind(self, key: Key, confirm_seq: int, delay_seconds: float) -> int:
        """Look at the due messages queued behind ``confirm_seq`` again in ``delay_seconds``."""
        async with self._engine.connect() as conn:
            result = await conn.execute(_HOLD, {"app": key.app, "topic": key.topic,
                                                "key": key.key,
                                                "after": confirm_seq, "delay": delay_seconds})
            return int(getattr(result, "rowcount", 0) or 0)

    async def release(self, token: str) -> None:
        """Release every key leased with ``token``."""
        async with self._engine.connect() as conn:
            await conn.execute(_RELEASE, {"token": token})
