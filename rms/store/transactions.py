"""Transactions of several messages: storing one with its messages, confirming or cancelling
all of them in one database transaction, and the check-back's claims and answers.

Every change of a transaction row is a guarded ``UPDATE transactions ... WHERE state =
'pending'`` (and, for a worker, ``AND claim_token = <its token>``); the change of its messages
runs in the same database transaction, guarded by their own source state and with their event
rows, so concurrent actors cannot both win and a transaction never splits: the second of a
concurrent confirm and cancel waits on the row lock, then matches nothing.

The request path's prepares, confirms and cancels are group-committed (:mod:`rms.batching`):
concurrent requests share one constant statement (:func:`create_sql`, :func:`change_sql`) that
writes the transactions, their messages and the messages' events at once, atomic on its own,
run on the asyncpg connection like :mod:`rms.store.coalesced`. A request the shared statement
did not write (a repeat, a taken id, a refused change) is answered, or written, on its own,
exactly as a request that runs alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson
from sqlalchemy import (
    CTE,
    ColumnElement,
    CompoundSelect,
    Row,
    Select,
    Update,
    and_,
    bindparam,
    func,
    insert,
    literal,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms.batching import Coalescer
from rms.domain import transaction_transitions as ledger
from rms.domain.errors import Conflict, NotFound
from rms.domain.listings import ListedTransaction, TransactionFilter
from rms.domain.models import Actor, Message
from rms.domain.states import DeadReason, Event
from rms.domain.transaction_transitions import TransactionTransition
from rms.domain.transactions import (
    NewTransaction,
    Transaction,
    TransactionState,
    TransactionView,
)
from rms.domain.transitions import Transition
from rms.store.batch import unnest_sql
from rms.store.claims import TRANSACTIONS_CHECK_DUE, check_claim
from rms.store.coalesced import (
    INPUT_ARRAYS,
    INPUT_SQL,
    PrepareItem,
    first_events_sql,
    insert_arrays,
    insert_messages,
    insert_rows_sql,
    insert_sql,
)
from rms.store.listings import decode_cursor, encode_key
from rms.store.raw import driver_connection, driver_of, item_specific
from rms.store.rows import message_from, to_message
from rms.store.schema import message_events, messages, transactions
from rms.store.transitions import core_values, event_of, jsonb, set_sql, sql_of, with_event

_STATES = {state.value: state for state in TransactionState}
_INSERT_MEMBERS = insert_sql(ledger.PREPARE_MEMBER)


def to_transaction(row: Row[Any]) -> Transaction:
    return transaction_from(row._mapping)


def transaction_from(m: Any, prefix: str = "") -> Transaction:
    """A Transaction from anything that reads ``transactions`` columns by name (an asyncpg
    Record or a Core row's mapping), each named ``prefix`` + its column name."""
    def col(name: str) -> Any:
        return m[prefix + name]

    reason = col("dead_reason")
    return Transaction(
        transaction_id=col("transaction_id"), app=col("app"), check_url=col("check_url"),
        message_ids=tuple(col("message_ids")), state=_STATES[col("state")], dead=col("dead"),
        dead_reason=DeadReason(reason) if reason else None,
        check_count=col("check_count"), check_after_seconds=col("check_after_seconds"),
        max_checks=col("max_checks"), created_at=col("created_at"),
        confirmed_at=col("confirmed_at"), cancelled_at=col("cancelled_at"),
        next_check_at=col("next_check_at"), claim_token=col("claim_token"))


def _transaction_clauses(where: TransactionFilter) -> list[Any]:
    """The WHERE clauses of a transaction listing's filters."""
    found: list[Any] = []
    if where.state is not None:
        found.append(transactions.c.state == where.state.value)
    if where.dead is not None:
        found.append(transactions.c.dead.is_(where.dead))
    if where.app is not None:
        found.append(transactions.c.app == where.app)
    return found


@dataclass(frozen=True, slots=True)
class TransactionClaim:
    """One worker's batch of transactions: ``claimed`` are to be checked now (their
    ``check_count`` counts this call); ``exhausted`` had no call left and were flagged dead."""

    token: str
    claimed: list[TransactionView]
    exhausted: list[TransactionView]


# every message of an exhausted transaction is flagged dead with it
_EXHAUSTED_MEMBER = ledger.CHECK_EXHAUSTED.member


def _dead_detail(flagged: CTE) -> ColumnElement[Any]:
    """``{"reason", "transaction_id"}`` of a flagged message's ``dead`` event."""
    return func.jsonb_build_object("reason", DeadReason.CHECK_EXHAUSTED.value,
                                   "transaction_id", flagged.c.transaction_id)


def _flag_members(of: ColumnElement[bool]) -> CTE:
    """The messages ``of`` (a condition on the messages) flagged dead with their
    transaction, as a CTE returning them."""
    return (update(messages)
            .where(of, messages.c.state == _EXHAUSTED_MEMBER.source.value)
            .values(**core_values(_EXHAUSTED_MEMBER))
            .returning(*messages.c).cte("flagged"))


def _claim_statement() -> CompoundSelect[Any]:
    """The claim, built once (:mod:`rms.store.claims`). Lock a batch of due transactions,
    oldest due first, ``FOR UPDATE SKIP LOCKED`` (workers never share one); count the call and
    push ``next_check_at`` to the end of a lease under a fresh token (:data:`ledger.CLAIM_CHECK`).
    A due transaction with no call left (its last caller died before recording the answer) is
    flagged dead with its messages instead (:data:`ledger.CHECK_EXHAUSTED`). Binds: limit,
    lease, token, actor. Returns the transaction rows, with ``was_exhausted``."""
    claimed, exhausted = check_claim(transactions, "transaction_id", TRANSACTIONS_CHECK_DUE,
                                     ledger.CLAIM_CHECK, ledger.CHECK_EXHAUSTED)
    flagged = _flag_members(messages.c.transaction_id == exhausted.c.transaction_id)
    dead_history = message_events.insert().from_select(
        ["message_id", "event", "actor", "detail"],
        select(flagged.c.message_id, literal(event_of(_EXHAUSTED_MEMBER).value),
               bindparam("actor"), _dead_detail(flagged)),
    ).cte("dead_history")
    return union_all(
        select(claimed, literal(False).label("was_exhausted")).add_cte(dead_history),
        select(exhausted, literal(True).label("was_exhausted")),
    )


CLAIM = _claim_statement()


def _answer(change: TransactionTransition, transaction_id: str, token: str,
            given: Mapping[str, Any] | None = None) -> Update:
    """``change`` of a transaction the worker claimed, only while its claim holds (a late
    worker matches nothing); returns the id of the changed row."""
    return (update(transactions)
            .where(transactions.c.transaction_id == transaction_id,
                   transactions.c.state == change.source.value,
                   transactions.c.claim_token == token)
            .values(**core_values(change, given, transactions))
            .returning(transactions.c.transaction_id))


# The coalesced confirm and cancel of the request path (:mod:`rms.batching`): many producers'
# or operators' changes in one statement, atomic on its own
_CHANGE_INPUT = (("transaction_id", "text"), ("app", "text"), ("actor", "text"),
                 ("detail", "text"))
# the columns of a changed transaction row in the statement's result, beside its message's
_ROW = "t_"
_ROW_COLUMNS = ", ".join(f"c.{column.name} AS {_ROW}{column.name}" for column in transactions.c)
_SEQ = "confirm_seq"


def change_sql(change: TransactionTransition) -> str:
    """``change`` of many transactions, each guarded by its source state and (when given) its
    app, with the change of each of its messages (and their event rows, each with that item's
    actor and detail) in the same statement: a transaction never splits. Returns one row per
    message of each changed transaction, in order, beside the transaction's own columns
    (prefixed ``t_``). A confirm claims its messages' first publishes with its own token and
    numbers its ordered messages in their listed order (the numbers are drawn in a sorted,
    materialized sub-select: PostgreSQL evaluates a volatile output column after the sort)."""
    member = change.member
    given = {"token": "'confirm:' || c.transaction_id"}
    moves = {name: effect for name, effect in member.effects.items() if name != _SEQ}
    numbered = sql_of(member.effects[_SEQ], "m.") if _SEQ in member.effects else "NULL"
    moved_seq = f", {_SEQ} = n.seq" if _SEQ in member.effects else ""
    member_set = ", ".join(f"{name} = {sql_of(effect, 'm.', given)}"
                           for name, effect in moves.items())
    return f"""
WITH input AS (
    {unnest_sql(_CHANGE_INPUT)}
), changed AS (
    UPDATE transactions t SET {set_sql(change, "t.")}
    FROM input u
    WHERE t.transaction_id = u.transaction_id AND t.state = '{change.source.value}'
      AND (u.app IS NULL OR t.app = u.app)
    RETURNING t.*, u.actor AS event_actor, u.detail AS event_detail
), numbered AS MATERIALIZED (
    SELECT m.message_id, {numbered} AS seq
    FROM messages m JOIN changed c ON m.transaction_id = c.transaction_id
    WHERE m.state = '{member.source.value}'
    ORDER BY m.transaction_id, m.transaction_position
), moved AS (
    UPDATE messages m SET {member_set}{moved_seq}
    FROM numbered n, changed c
    WHERE m.message_id = n.message_id AND m.transaction_id = c.transaction_id
      AND m.state = '{member.source.value}'
    RETURNING m.*
), history AS (
    INSERT INTO message_events (message_id, event, actor, detail)
    SELECT mv.message_id, '{event_of(member).value}', c.event_actor, c.event_detail::jsonb
    FROM moved mv JOIN changed c ON mv.transaction_id = c.transaction_id
)
SELECT {_ROW_COLUMNS}, mm.*
FROM changed c LEFT JOIN LATERAL (
    SELECT * FROM moved mv WHERE mv.transaction_id = c.transaction_id
    UNION ALL
    SELECT * FROM messages m WHERE m.transaction_id = c.transaction_id
      AND NOT EXISTS (SELECT 1 FROM moved mv WHERE mv.message_id = m.message_id)
) mm ON true
ORDER BY c.transaction_id, mm.transaction_position
"""


_CHANGES = {change.action: change_sql(change) for change in (ledger.CONFIRM, ledger.CANCEL)}


@dataclass(frozen=True, slots=True)
class ChangeItem:
    """One request's confirm or cancel: the transaction (of ``app``, None: any app's), who
    asks, and the detail of its messages' events."""

    transaction_id: str
    app: str | None
    actor: str
    detail: Mapping[str, Any]


async def change_many(driver: Any, sql: str, items: Sequence[ChangeItem]
                      ) -> list[TransactionView | None]:
    """Run a :func:`change_sql` statement; per item the transaction it changed with its
    messages, or None (this item changed nothing: a second item for the same transaction is
    answered as if it came just after the first)."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(item.transaction_id, index)
    chosen = sorted((items[index] for index in first.values()),
                    key=lambda item: item.transaction_id)  # one lock order for every flush
    rows = await driver.fetch(
        sql, [i.transaction_id for i in chosen], [i.app for i in chosen],
        [i.actor for i in chosen], [orjson.dumps(dict(i.detail)).decode() for i in chosen])
    changed = _grouped(rows)
    return [changed.get(item.transaction_id) if first[item.transaction_id] == index else None
            for index, item in enumerate(items)]


def _grouped(rows: Sequence[Any]) -> dict[str, TransactionView]:
    """The views in the rows of a statement that returns each transaction's messages beside
    its own columns (prefixed ``t_``), in order."""
    found: dict[str, tuple[Transaction, list[Message]]] = {}
    for row in rows:
        transaction_id = row[_ROW + "transaction_id"]
        if transaction_id not in found:
            found[transaction_id] = (transaction_from(row, _ROW), [])
        if row["message_id"] is not None:
            found[transaction_id][1].append(message_from(row))
    return {key: TransactionView(transaction, tuple(members))
            for key, (transaction, members) in found.items()}


# The coalesced prepare of the request path: many producers' transactions in one statement
_CREATE_INPUT = (("transaction_id", "text"), ("app", "text"), ("check_url", "text"),
                 ("check_after_seconds", "float8"), ("max_checks", "int"))


def create_sql() -> str:
    """Store many new transactions, each with its messages (``pending-send``, the one insert
    of messages) and their first events, in one statement. A transaction whose id is taken, or
    one of whose message ids is, stores nothing and returns nothing; a message id taken by a
    concurrent writer after the statement began fails the statement (it never stores a
    transaction without one of its messages). Returns one row per message of each created
    transaction, in order, beside the transaction's own columns (prefixed ``t_``). Binds: the
    messages' arrays (:func:`rms.store.coalesced.insert_arrays`), then the transactions'."""
    columns = ", ".join(name for name, _ in _CREATE_INPUT)
    prepared = ledger.PREPARE.effects
    given = {"check_after": "f.check_after_seconds"}
    return f"""
WITH input AS (
    {INPUT_SQL}
), asked AS (
    {unnest_sql(_CREATE_INPUT, "t", first=INPUT_ARRAYS + 1)}
), fresh AS (
    SELECT a.* FROM asked a
    WHERE NOT EXISTS (SELECT 1 FROM input i JOIN messages m ON m.message_id = i.message_id
                      WHERE i.transaction_id = a.transaction_id)
), created AS (
    INSERT INTO transactions ({columns}, message_ids, {", ".join(prepared)})
    SELECT {", ".join(f"f.{name}" for name, _ in _CREATE_INPUT)},
           ARRAY(SELECT i.message_id FROM input i WHERE i.transaction_id = f.transaction_id
                 ORDER BY i.transaction_position),
           {", ".join(sql_of(effect, "f.", given) for effect in prepared.values())}
    FROM fresh f
    ON CONFLICT (transaction_id) DO NOTHING
    RETURNING *
), members AS (
    SELECT i.* FROM input i WHERE i.transaction_id IN (SELECT transaction_id FROM created)
), inserted AS (
    {insert_rows_sql(ledger.PREPARE_MEMBER, "members", skip_taken=False)}
), history AS (
    {first_events_sql(ledger.PREPARE_MEMBER, "inserted")}
)
SELECT {_ROW_COLUMNS}, mm.*
FROM created c LEFT JOIN inserted mm ON mm.transaction_id = c.transaction_id
ORDER BY c.transaction_id, mm.transaction_position
"""


_CREATE = create_sql()


@dataclass(frozen=True, slots=True)
class CreateItem:
    app: str
    draft: NewTransaction


async def create_many(driver: Any, items: Sequence[CreateItem]) -> list[TransactionView | None]:
    """Run :data:`_CREATE`; per item the transaction it created, or None (it created nothing:
    its id or a message id is taken, or an earlier item of the flush has its id)."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(item.draft.transaction_id, index)
    chosen = [items[index] for index in first.values()]
    members = [PrepareItem(item.app, message, item.draft.transaction_id, position)
               for item in chosen for position, message in enumerate(item.draft.messages)]
    drafts = [item.draft for item in chosen]
    rows = await driver.fetch(
        _CREATE, *insert_arrays(members), [d.transaction_id for d in drafts],
        [item.app for item in chosen], [d.check_url for d in drafts],
        [float(d.check_after_seconds) for d in drafts], [d.max_checks for d in drafts])
    created = _grouped(rows)
    return [created.get(item.draft.transaction_id)
            if first[item.draft.transaction_id] == index else None
            for index, item in enumerate(items)]


class TransactionStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._creates: Coalescer[CreateItem, TransactionView | None] = Coalescer(
            self._creator, name="transaction-prepare", max_items=200, max_inflight=4,
            item_specific=item_specific)
        self._changes: dict[str, Coalescer[ChangeItem, TransactionView | None]] = {
            action: Coalescer(self._changer(sql), name=f"transaction-{action}", max_items=500,
                              max_inflight=4, item_specific=item_specific)
            for action, sql in _CHANGES.items()}

    async def _creator(self, items: Sequence[CreateItem]) -> list[TransactionView | None]:
        async with driver_connection(self._engine) as driver:
            return await create_many(driver, items)

    def _changer(self, sql: str) -> Any:
        async def flush(items: Sequence[ChangeItem]) -> list[TransactionView | None]:
            async with driver_connection(self._engine) as driver:
                return await change_many(driver, sql, items)
        return flush

    # ---- create and read ---------------------------------------------------------------

    async def create(self, app: str, draft: NewTransaction) -> tuple[TransactionView, bool]:
        """Store the transaction and its messages (``pending-send``, never checked on their
        own) in one database transaction. Returns ``(view, created)``; when the id is taken,
        the stored transaction with ``created=False`` (the caller compares content). A message
        id already used raises 409 and stores nothing.

        Concurrent creates share one statement (:func:`create_sql`); one that stored nothing
        there (its id or a message id taken, or taken meanwhile) is written alone, which
        answers it exactly."""
        try:
            view = await self._creates.submit(CreateItem(app, draft))
        except asyncpg.UniqueViolationError:  # a message id taken while the statement ran
            view = None
        if view is not None:
            return view, True
        return await self._create_alone(app, draft)

    async def _create_alone(self, app: str, draft: NewTransaction
                            ) -> tuple[TransactionView, bool]:
        async with self._engine.begin() as conn:
            row = (await conn.execute(
                pg_insert(transactions).values(
                    transaction_id=draft.transaction_id, app=app, check_url=draft.check_url,
                    message_ids=[m.message_id for m in draft.messages],
                    check_after_seconds=draft.check_after_seconds, max_checks=draft.max_checks,
                    **core_values(ledger.PREPARE, {"check_after": draft.check_after_seconds},
                                  transactions))
                .on_conflict_do_nothing(index_elements=["transaction_id"])
                .returning(*transactions.c))).first()
            if row is None:
                existing = await self._view(conn, draft.transaction_id)
                if existing is None:  # cannot happen: the conflicting row is committed
                    raise Conflict(f"transaction {draft.transaction_id!r} could not be "
                                   "stored; retry")
                return existing, False
            stored = await self._insert_messages(conn, app, draft)
            return TransactionView(to_transaction(row), tuple(stored)), True

    async def _insert_messages(self, conn: AsyncConnection, app: str, draft: NewTransaction
                               ) -> list[Message]:
        """The transaction's messages, by the one insert of messages (in the database
        transaction of ``conn``); a message id already used raises 409."""
        items = [PrepareItem(app, m, draft.transaction_id, position)
                 for position, m in enumerate(draft.messages)]
        written = await insert_messages(await driver_of(conn), items, _INSERT_MEMBERS)
        for index, (stored, created) in enumerate(written):
            if not created or stored is None:
                raise Conflict(f"messages[{index}]: message id "
                               f"{draft.messages[index].message_id!r} is already used; use a "
                               "new message_id for a new message")
        return [stored for stored, _ in written if stored is not None]

    async def get(self, transaction_id: str, *, app: str | None = None) -> TransactionView:
        async with self._engine.connect() as conn:
            view = await self._view(conn, transaction_id)
        if view is None or (app is not None and view.transaction.app != app):
            raise NotFound(f"no transaction {transaction_id!r}")
        return view

    async def _view(self, conn: AsyncConnection, transaction_id: str) -> TransactionView | None:
        return (await self._views(conn, [transaction_id])).get(transaction_id)

    async def _views(self, conn: AsyncConnection, ids: list[str]) -> dict[str, TransactionView]:
        """The transactions of ``ids`` that exist, each with its messages in order (two
        statements whatever the number)."""
        if not ids:
            return {}
        rows = await conn.execute(select(transactions).where(
            transactions.c.transaction_id.in_(ids)))
        found = await conn.execute(
            select(messages).where(messages.c.transaction_id.in_(ids))
            .order_by(messages.c.transaction_id, messages.c.transaction_position))
        members: dict[str, list[Message]] = {}
        for row in found:
            members.setdefault(row.transaction_id, []).append(to_message(row))
        return {row.transaction_id: TransactionView(
            to_transaction(row), tuple(members.get(row.transaction_id, ())))
            for row in rows}

    async def search(self, where: TransactionFilter, limit: int, cursor: str | None
                     ) -> tuple[list[ListedTransaction], str | None]:
        """Transactions of any app matching ``where``, oldest first, ``limit`` at a time
        after the keyset ``cursor`` (``(created_at, transaction_id)``; index
        ``transactions_created``)."""
        age = func.extract("epoch", func.now() - transactions.c.created_at).label("age")
        statement: Select[Any] = select(transactions, age).where(*_transaction_clauses(where))
        if cursor is not None:
            statement = statement.where(
                tuple_(transactions.c.created_at, transactions.c.transaction_id)
                > tuple_(*decode_cursor(cursor)))
        statement = statement.order_by(transactions.c.created_at,
                                       transactions.c.transaction_id).limit(limit + 1)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        found = [ListedTransaction(to_transaction(row), max(0.0, float(row.age)))
                 for row in rows[:limit]]
        last = found[-1].transaction if found else None
        more = len(rows) > limit and last is not None
        return found, encode_key(last.created_at, last.transaction_id) if more and last else None

    # ---- confirm and cancel ------------------------------------------------------------

    async def change(self, transaction_id: str, change: TransactionTransition, *,
                     app: str | None, actor: str, by: Actor, claim_token: str | None = None,
                     checked: Mapping[str, Any] | None = None
                     ) -> tuple[TransactionView, bool]:
        """Confirm or cancel the transaction and every one of its messages, in one database
        transaction. Returns ``(view, changed)``: ``changed`` is False for a repeat (already
        in the target state). Raises NotFound (unknown, or another app's) or Conflict naming
        the current state. ``claim_token``: only while the worker's claim holds (a lost claim
        raises :class:`ClaimLost`); ``checked``: the check-back answer's detail, recorded as a
        ``checked`` event on each message first. A producer's or operator's change (no claim,
        no answer) shares one statement with concurrent ones (:func:`change_sql`)."""
        if claim_token is None and checked is None and change.action in self._changes:
            return await self._change_coalesced(transaction_id, change, app=app, actor=actor,
                                                by=by)
        guard = [transactions.c.transaction_id == transaction_id,
                 transactions.c.state == change.source.value]
        if app is not None:
            guard.append(transactions.c.app == app)
        if claim_token is not None:
            guard.append(transactions.c.claim_token == claim_token)
        async with self._engine.begin() as conn:
            row = (await conn.execute(
                update(transactions).where(and_(*guard))
                .values(**core_values(change, target=transactions))
                .returning(*transactions.c))).first()
            if row is None:
                current = await self._view(conn, transaction_id)
                return _explain_miss(transaction_id, change, current, app, claim_token), False
            if checked is not None:
                await self._checked(conn, transaction_id, actor, checked)
            moved, member = _move_members(transaction_id, change)
            await conn.execute(with_event(moved, event_of(member), actor,
                                          {"by": by.value, "transaction_id": transaction_id}))
            view = await self._view(conn, transaction_id)
        assert view is not None
        return view, True

    async def _change_coalesced(self, transaction_id: str, change: TransactionTransition, *,
                                app: str | None, actor: str, by: Actor
                                ) -> tuple[TransactionView, bool]:
        """A producer's or operator's confirm or cancel, written with concurrent ones in one
        statement (:func:`change_sql`); a request that changed nothing is answered from the
        transaction as it stands (a repeat, 409 or 404), exactly as when it runs alone."""
        item = ChangeItem(transaction_id, app, actor,
                          {"by": by.value, "transaction_id": transaction_id})
        view = await self._changes[change.action].submit(item)
        if view is not None:
            return view, True
        async with self._engine.connect() as conn:
            current = await self._view(conn, transaction_id)
        return _explain_miss(transaction_id, change, current, app, None), False

    # ---- the check-back ----------------------------------------------------------------

    async def claim(self, limit: int, lease_seconds: float, actor: str) -> TransactionClaim:
        """Claim up to ``limit`` due transactions with one statement (:data:`CLAIM`), then
        read them with their messages."""
        token = f"{actor}:{uuid.uuid4().hex}"
        params = {"limit": limit, "lease": lease_seconds, "token": token, "actor": actor}
        async with self._engine.begin() as conn:
            rows = (await conn.execute(CLAIM, params)).all()
            fresh = [r.transaction_id for r in rows if not r.was_exhausted]
            spent = [r.transaction_id for r in rows if r.was_exhausted]
            views = await self._views(conn, fresh + spent)
        return TransactionClaim(token, [views[t] for t in fresh], [views[t] for t in spent])

    async def retry(self, transaction_id: str, token: str, delay_seconds: float, actor: str,
                    checked: Mapping[str, Any]) -> bool:
        """An ``unknown`` answer with calls left: due again after ``delay_seconds``. False
        when the claim was lost (only the ``checked`` events, marked stale, are written)."""
        async with self._engine.begin() as conn:
            row = (await conn.execute(
                _answer(ledger.RETRY_CHECK, transaction_id, token, {"delay": delay_seconds})
            )).first()
            await self._checked(conn, transaction_id, actor,
                                dict(checked) | ({} if row else {"stale": True}))
        return row is not None

    async def exhaust(self, transaction_id: str, token: str, actor: str,
                      checked: Mapping[str, Any]) -> bool:
        """An ``unknown`` answer to the last call: the transaction and its messages are
        flagged dead (check-exhausted) for an operator. False when the claim was lost."""
        async with self._engine.begin() as conn:
            row = (await conn.execute(
                _answer(ledger.CHECK_EXHAUSTED, transaction_id, token))).first()
            await self._checked(conn, transaction_id, actor,
                                dict(checked) | ({} if row else {"stale": True}))
            if row is not None:
                flagged = _flag_members(messages.c.transaction_id == transaction_id)
                await conn.execute(with_event(flagged, event_of(_EXHAUSTED_MEMBER), actor,
                                              _dead_detail))
        return row is not None

    async def lost_claim(self, transaction_id: str, actor: str,
                         checked: Mapping[str, Any]) -> None:
        """A committed / rolled_back answer whose claim was lost: the call did happen."""
        async with self._engine.begin() as conn:
            await self._checked(conn, transaction_id, actor, dict(checked) | {"stale": True})

    async def _checked(self, conn: AsyncConnection, transaction_id: str, actor: str,
                       detail: Mapping[str, Any]) -> None:
        """A ``checked`` event on each message of the transaction (the call was about all of
        them)."""
        full = dict(detail) | {"transaction_id": transaction_id}
        await conn.execute(insert(message_events).from_select(
            ["message_id", "event", "actor", "detail"],
            select(messages.c.message_id, literal(Event.CHECKED.value), literal(actor),
                   jsonb(full))
            .where(messages.c.transaction_id == transaction_id)
            .order_by(messages.c.transaction_position)))


def _move_members(transaction_id: str, change: TransactionTransition) -> tuple[Any, Transition]:
    """The change of every message of the transaction, as a CTE returning the changed rows,
    and the message transition it applies (a confirm's claims its messages' first publishes
    with the confirm's own token). A confirm numbers its ordered messages (``confirm_seq``) in
    their listed order: the numbers are drawn in a sub-select sorted by position (PostgreSQL
    evaluates a volatile output column after the sort), never in the order the ``UPDATE``
    happens to visit rows."""
    member = change.member
    values = core_values(member, {"token": literal(f"confirm:{transaction_id}")})
    members = [messages.c.transaction_id == transaction_id,
               messages.c.state == member.source.value]
    if "confirm_seq" in values:
        numbered = (
            select(messages.c.message_id, values["confirm_seq"].label("seq"))
            .where(*members).order_by(messages.c.transaction_position)
            .cte("numbered").prefix_with("MATERIALIZED"))
        values["confirm_seq"] = numbered.c.seq
        members.append(messages.c.message_id == numbered.c.message_id)
    moved = update(messages).where(*members).values(values).returning(*messages.c).cte("moved")
    return moved, member


class ClaimLost(Exception):
    """The worker's claim on the transaction expired or the transaction was resolved
    meanwhile: nothing was changed."""


def _explain_miss(transaction_id: str, change: TransactionTransition,
                  current: TransactionView | None, app: str | None,
                  claim_token: str | None) -> TransactionView:
    if current is None or (app is not None and current.transaction.app != app):
        raise NotFound(f"no transaction {transaction_id!r}")
    if claim_token is not None:
        raise ClaimLost(transaction_id)
    state = current.transaction.state
    if state is change.target:
        return current
    raise Conflict(f"cannot {change.action} transaction {transaction_id!r}: its current "
                   f"state is {state.value!r}")
