"""The request path's writes, many requests per statement (see :mod:`rms.batching`).

Prepare, one-shot send and the guarded confirm / cancel / ack transitions of concurrent requests
are written by one ``INSERT ... SELECT FROM unnest(...)`` or ``UPDATE ... FROM unnest(...)``
whose event rows are inserted by the same statement, then committed once. The statements are
constant text generated from the transition table (and the reads Core compiled once), run on
the asyncpg connection, so PostgreSQL and asyncpg keep them prepared.
The guarantees are those of :mod:`rms.store.messages`: every change is guarded by the expected
state (and the app), and a transition and its history commit together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import ARRAY, Text, any_, bindparam, select
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.batching import Coalescer
from rms.domain.models import Message, NewMessage
from rms.domain.transitions import Transition, new_message
from rms.store.batch import unnest_sql
from rms.store.raw import RawStatement, driver_connection, item_specific
from rms.store.rows import message_from
from rms.store.schema import messages
from rms.store.transitions import event_of, publishing_sql, set_sql, sql_of

_INPUT: tuple[tuple[str, str], ...] = (
    ("message_id", "text"), ("app", "text"), ("topic", "text"), ("key", "text"),
    ("payload", "text"), ("headers", "text"), ("check_url", "text"),
    ("check_after_seconds", "float8"), ("max_checks", "int"), ("ack_timeout_seconds", "float8"),
    ("max_deliveries", "int"), ("traceparent", "text"), ("tracestate", "text"),
    ("ordered", "bool"), ("transaction_id", "text"), ("transaction_position", "int"))
# the delay as given (an absolute time or seconds from now), resolved on the database clock into
# the stored ``deliver_after``
_DELAY: tuple[tuple[str, str], ...] = (("deliver_at", "timestamptz"), ("delay_seconds", "float8"))
_STORED = {"payload": "payload::jsonb", "headers": "headers::jsonb"}
_DELIVER_AFTER = ("coalesce(deliver_at, now() + make_interval(secs => delay_seconds)) "
                  "AS deliver_after")
# the first event of a transaction's message names its transaction
_FIRST_DETAIL = ("CASE WHEN transaction_id IS NULL THEN '{}'::jsonb "
                 "ELSE jsonb_build_object('transaction_id', transaction_id) END")


def insert_sql(change: Transition) -> str:
    """Insert new messages in the state ``change`` creates (its effects computed from the input
    row) with their first event; a taken id inserts nothing and returns nothing. The one
    insert of messages: single prepares and sends, batches and the messages of a
    transaction."""
    return f"""
WITH input AS (
    {INPUT_SQL}
), inserted AS (
    {insert_rows_sql(change, "input")}
), history AS (
    {first_events_sql(change, "inserted")}
)
SELECT * FROM inserted
"""


# the new messages' rows, from the arrays of :func:`insert_arrays` (the parameters $1..$n,
# n = INPUT_ARRAYS)
INPUT_SQL = f"SELECT given.*, {_DELIVER_AFTER} FROM ({unnest_sql(_INPUT + _DELAY)}) AS given"
INPUT_ARRAYS = len(_INPUT + _DELAY)


def insert_rows_sql(change: Transition, source: str, *, skip_taken: bool = True) -> str:
    """``INSERT INTO messages ... SELECT ... FROM <source> ... RETURNING *``: the rows of
    ``source`` (shaped as :data:`INPUT_SQL`) in the state ``change`` creates. ``skip_taken``:
    a taken id inserts nothing (else it fails the statement)."""
    effects = {column: sql_of(effect, row=f"{source}.")
               for column, effect in change.effects.items()}
    # an effect on a column the input gives replaces the given value (a confirm's settings
    # owed to the subscribers)
    names = [name for name, _ in _INPUT if name not in effects] + ["deliver_after"]
    inserted = ", ".join(names + list(effects))
    selected = ", ".join([_STORED.get(name, name) for name in names] + list(effects.values()))
    skip = "ON CONFLICT (message_id) DO NOTHING" if skip_taken else ""
    return f"INSERT INTO messages ({inserted}) SELECT {selected} FROM {source} {skip} RETURNING *"


def first_events_sql(change: Transition, source: str) -> str:
    """The first event of each message inserted (``source``: their rows), and the
    ``publishing`` event of each that a one-shot send gave its first delivery."""
    return (f"INSERT INTO message_events (message_id, event, actor, detail) "
            f"SELECT message_id, '{event_of(change).value}', 'app:' || app, {_FIRST_DETAIL} "
            f"FROM {source}{_publishing(change, source, chr(39) + 'app:' + chr(39) + ' || app')}")


# the rows of many ids (binds: ids), Core compiled once for the driver connection
_DRIVER: Dialect = asyncpg_dialect()  # type: ignore[no-untyped-call]
_IDS = messages.c.message_id == any_(bindparam("ids", type_=ARRAY(Text)))
SELECT_MESSAGES = RawStatement(select(messages).where(_IDS), _DRIVER)

_ITEMS = (("message_id", "text"), ("app", "text"), ("actor", "text"), ("detail", "text"))
# an item that names one instance of its message id: the row changes only while it is that one
_INSTANCE_ITEMS = (*_ITEMS, ("created_at", "timestamptz"))


def transition_sql(change: Transition, returning: str = "m.*", *, instance: bool = False) -> str:
    """``change`` for many ids, each guarded by its source state and (when given) its app,
    appending one event per changed row with that item's actor and detail; returns
    ``returning`` of each changed row. A transition that applies to a message only outside a
    transaction (``alone``) leaves the messages of a transaction unchanged. With ``instance``
    each item also carries a ``created_at`` that the row must have: an id freed and used again
    between a check and this statement names another instance, which stays unchanged."""
    alone = " AND m.transaction_id IS NULL" if change.alone else ""
    same = " AND m.created_at = u.created_at" if instance else ""
    return f"""
WITH input AS (
    {unnest_sql(_INSTANCE_ITEMS if instance else _ITEMS)}
), changed AS (
    UPDATE messages m SET {set_sql(change)}
    FROM input u
    WHERE m.message_id = u.message_id AND m.state = '{change.source.value}'{alone}
      AND (u.app IS NULL OR m.app = u.app){same}
    RETURNING {returning}, u.actor AS event_actor, u.detail AS event_detail
), history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT message_id, '{event_of(change).value}', event_actor, event_detail::jsonb FROM changed{
        _publishing(change, "changed", "event_actor")}
)
SELECT * FROM changed
"""


def _publishing(change: Transition, source: str, actor: str) -> str:
    """The ``publishing`` events of the rows of ``source`` that ``change`` gave a delivery
    (a ``UNION ALL`` to a history insert's ``SELECT``), or nothing when it reserves none."""
    return f"\n    UNION ALL {publishing_sql(source, actor)}" if change.reserves else ""


def insert_statement(one_shot: bool) -> str:
    """The insert of a prepare (``pending-send``) or a one-shot send (``sent``, first delivery
    reserved, see :mod:`rms.dispatcher`)."""
    return _INSERTS[new_message(one_shot).action]


_INSERTS = {change.action: insert_sql(change) for change in (new_message(False), new_message(True))}


@dataclass(frozen=True, slots=True)
class PrepareItem:
    """A new message of ``app``; ``transaction_id`` and ``position``: its place in a
    transaction (None for a message on its own)."""

    app: str
    draft: NewMessage
    transaction_id: str | None = None
    position: int | None = None


@dataclass(frozen=True, slots=True)
class TransitionItem:
    message_id: str
    app: str | None
    actor: str
    detail: dict[str, Any]


# (the stored message or None, whether this item created / changed it)
Written = tuple[Message | None, bool]


class CoalescedWrites:
    """One coalescer per statement kind. A flush is one statement, atomic on its own (no
    BEGIN/COMMIT round trips); the rows it did not write are read afterwards, so a request
    that changed nothing is answered from the row as it stands (idempotent repeat, 409 or
    404), exactly as when it runs alone."""

    def __init__(self, engine: AsyncEngine, max_batch: int = 500, max_inflight: int = 4) -> None:
        self._engine = engine
        self._max_batch = max_batch
        self._max_inflight = max_inflight
        self._coalescers: dict[str, Coalescer[Any, Written]] = {}

    async def prepare(self, item: PrepareItem, *, one_shot: bool) -> Written:
        sql = insert_statement(one_shot)
        return await self._coalescer(sql, self._inserter(sql)).submit(item)

    async def transition(self, item: TransitionItem, sql: str) -> Written:
        return await self._coalescer(sql, self._updater(sql)).submit(item)

    def _coalescer(self, kind: str, flush: Any) -> Coalescer[Any, Written]:
        coalescer = self._coalescers.get(kind)
        if coalescer is None:
            coalescer = Coalescer(flush, name=kind, max_items=self._max_batch,
                                  max_inflight=self._max_inflight, item_specific=item_specific)
            self._coalescers[kind] = coalescer
        return coalescer

    def _inserter(self, sql: str) -> Any:
        async def flush(items: Sequence[PrepareItem]) -> list[Written]:
            async with driver_connection(self._engine) as driver:
                return await insert_messages(driver, items, sql)
        return flush

    def _updater(self, sql: str) -> Any:
        async def flush(items: Sequence[TransitionItem]) -> list[Written]:
            async with driver_connection(self._engine) as driver:
                return await update_messages(driver, sql, items)
        return flush


async def insert_messages(driver: Any, items: Sequence[PrepareItem], sql: str
                          ) -> list[Written]:
    """Insert new messages (``ON CONFLICT DO NOTHING``) with their first event; per item the
    row it created, or the row already under its id. Also the all-or-nothing batch endpoint's
    statement (run inside its transaction)."""
    first = _first_of_each([i.draft.message_id for i in items])
    arrays = insert_arrays([items[index] for index in first.values()])
    rows = await driver.fetch(sql, *arrays)
    created = {row["message_id"]: message_from(row) for row in rows}
    existing = await select_messages(driver, [i for i in first if i not in created])
    return _answers([i.draft.message_id for i in items], first, created, existing)


async def update_messages(driver: Any, sql: str, items: Sequence[TransitionItem]) -> list[Written]:
    """Run a :func:`transition_sql` statement; per item the row it changed, or the row as it
    stands."""
    first = _first_of_each([i.message_id for i in items])
    chosen = [items[index] for index in first.values()]
    rows = await driver.fetch(
        sql, [i.message_id for i in chosen], [i.app for i in chosen],
        [i.actor for i in chosen], [orjson.dumps(i.detail).decode() for i in chosen])
    changed = {row["message_id"]: message_from(row) for row in rows}
    rest = await select_messages(driver, [i for i in first if i not in changed])
    return _answers([i.message_id for i in items], first, changed, rest)


async def select_messages(driver: Any, ids: Sequence[str]) -> dict[str, Message]:
    """The stored rows of ``ids`` on ``driver``, by id (none asked: no query)."""
    if not ids:
        return {}
    rows = await driver.fetch(SELECT_MESSAGES.sql, *SELECT_MESSAGES.args(ids=list(ids)))
    return {row["message_id"]: message_from(row) for row in rows}


def _first_of_each(ids: Sequence[str]) -> dict[str, int]:
    """Index of the first item per id: a second item with the same id in one flush is
    answered from what the first one did, like a request that came just after it."""
    first: dict[str, int] = {}
    for index, message_id in enumerate(ids):
        first.setdefault(message_id, index)
    return first


def _answers(ids: Sequence[str], first: dict[str, int], written: dict[str, Message],
             others: dict[str, Message]) -> list[Written]:
    """Per item: the row this flush wrote (``True`` for the item that wrote it), else the row
    as it stands (``None`` when there is none)."""
    answers: list[Written] = []
    for index, message_id in enumerate(ids):
        if message_id in written:
            answers.append((written[message_id], first[message_id] == index))
        else:
            answers.append((others.get(message_id), False))
    return answers


def insert_arrays(items: Sequence[PrepareItem]) -> list[list[Any]]:
    """The parameters of :data:`INPUT_SQL` for ``items``, in order."""
    drafts = [i.draft for i in items]
    return [
        [d.message_id for d in drafts], [i.app for i in items], [d.topic for d in drafts],
        [d.key for d in drafts], [orjson.dumps(d.payload).decode() for d in drafts],
        [orjson.dumps(d.headers).decode() for d in drafts], [d.check_url for d in drafts],
        [float(d.check_after_seconds) for d in drafts], [d.max_checks for d in drafts],
        [float(d.ack_timeout_seconds) for d in drafts], [d.max_deliveries for d in drafts],
        [d.trace.traceparent if d.trace else None for d in drafts],
        [d.trace.tracestate if d.trace else None for d in drafts],
        [d.ordered for d in drafts],
        [i.transaction_id for i in items], [i.position for i in items],
        # _DELAY
        [d.deliver_after for d in drafts],
        [None if d.delay_seconds is None else float(d.delay_seconds) for d in drafts],
    ]
