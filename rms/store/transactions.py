"""Transactions of several messages: storing one with its messages, confirming or cancelling
all of them together, and the check-back's claims and answers.

Every change of a transaction row is a guarded ``UPDATE transactions ... WHERE state =
'pending'`` (and, for a worker, ``AND claim_token = <its token>``); the change of its messages
runs in the same statement, guarded by their own source state and with their event rows, so
concurrent actors cannot both win and a transaction never splits: the second of a concurrent
confirm and cancel waits on the row lock, then matches nothing.

Each change has one statement (:mod:`rms.store.transaction_sql`), run on the asyncpg connection
like :mod:`rms.store.coalesced`: the request path's prepares, confirms and cancels are
group-committed (:mod:`rms.batching`) and a lone request is a batch of one; a request the
statement did not write (a repeat, a taken id, a refused change) is answered from the rows as
they stand.
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
    bindparam,
    func,
    literal,
    select,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms.batching import Coalescer
from rms.domain import transaction_transitions as ledger
from rms.domain.errors import Conflict, NotFound
from rms.domain.listings import ListedTransaction, TransactionFilter
from rms.domain.models import Actor, Message
from rms.domain.states import DeadReason
from rms.domain.transaction_transitions import TransactionTransition
from rms.domain.transactions import (
    NewTransaction,
    Transaction,
    TransactionState,
    TransactionView,
)
from rms.store.claims import TRANSACTIONS_CHECK_DUE, check_claim
from rms.store.coalesced import PrepareItem, insert_arrays
from rms.store.listings import decode_cursor, encode_key
from rms.store.raw import driver_connection, item_specific
from rms.store.rows import message_from, to_message
from rms.store.schema import message_events, messages, transactions
from rms.store.transaction_sql import ANSWER, CHANGES, CREATE, ROW
from rms.store.transitions import core_values, event_of

_STATES = {state.value: state for state in TransactionState}


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


@dataclass(frozen=True, slots=True)
class ChangeItem:
    """One request's confirm or cancel: the transaction (of ``app``, None: any app's), who
    asks, and the detail of its messages' events."""

    transaction_id: str
    app: str | None
    actor: str
    detail: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CreateItem:
    app: str
    draft: NewTransaction


@dataclass(frozen=True, slots=True)
class AnswerItem:
    """One check-back answer for a transaction claimed under ``token``: its change
    (:data:`rms.store.transaction_sql.ANSWERS`), the detail of its ``checked`` events and the
    delay of a retry."""

    transaction_id: str
    token: str
    change: TransactionTransition
    actor: str
    checked: Mapping[str, Any]
    delay_seconds: float = 0.0

    @property
    def detail(self) -> dict[str, Any]:
        """The detail of its messages' events: who confirmed or cancelled them, or why they
        are dead."""
        said = ({"reason": DeadReason.CHECK_EXHAUSTED.value}
                if self.change is ledger.CHECK_EXHAUSTED else {"by": Actor.CHECK_BACK.value})
        return said | {"transaction_id": self.transaction_id}


def _json(value: Mapping[str, Any]) -> str:
    return orjson.dumps(dict(value)).decode()


def _first_of_each(ids: Sequence[str]) -> dict[str, int]:
    """Index of the first item per transaction id: a second item for the same transaction in
    one flush is answered as if it came just after the first."""
    first: dict[str, int] = {}
    for index, transaction_id in enumerate(ids):
        first.setdefault(transaction_id, index)
    return first


def _per_item(ids: Sequence[str], first: Mapping[str, int],
              written: Mapping[str, TransactionView]) -> list[TransactionView | None]:
    return [written.get(transaction_id) if first[transaction_id] == index else None
            for index, transaction_id in enumerate(ids)]


async def change_many(driver: Any, sql: str, items: Sequence[ChangeItem]
                      ) -> list[TransactionView | None]:
    """Run a :func:`~rms.store.transaction_sql.change_sql` statement; per item the transaction
    it changed with its messages, or None (this item changed nothing)."""
    ids = [item.transaction_id for item in items]
    first = _first_of_each(ids)
    chosen = sorted((items[index] for index in first.values()),
                    key=lambda item: item.transaction_id)  # one lock order for every flush
    rows = await driver.fetch(
        sql, [i.transaction_id for i in chosen], [i.app for i in chosen],
        [i.actor for i in chosen], [_json(i.detail) for i in chosen])
    return _per_item(ids, first, _grouped(rows))


async def create_many(driver: Any, items: Sequence[CreateItem]) -> list[TransactionView | None]:
    """Run :data:`~rms.store.transaction_sql.CREATE`; per item the transaction it created, or
    None (it created nothing: its id or a message id is taken, or an earlier item of the flush
    has its id)."""
    ids = [item.draft.transaction_id for item in items]
    first = _first_of_each(ids)
    chosen = [items[index] for index in first.values()]
    members = [PrepareItem(item.app, message, item.draft.transaction_id, position)
               for item in chosen for position, message in enumerate(item.draft.messages)]
    drafts = [item.draft for item in chosen]
    rows = await driver.fetch(
        CREATE, *insert_arrays(members), [d.transaction_id for d in drafts],
        [item.app for item in chosen], [d.check_url for d in drafts],
        [float(d.check_after_seconds) for d in drafts], [d.max_checks for d in drafts])
    return _per_item(ids, first, _grouped(rows))


async def answer_many(driver: Any, items: Sequence[AnswerItem]) -> list[TransactionView | None]:
    """Run :data:`~rms.store.transaction_sql.ANSWER`; per item the transaction its answer
    changed, with its messages, or None (its claim was lost: only the ``checked`` events,
    marked stale, were written)."""
    ids = [item.transaction_id for item in items]
    if len(set(ids)) < len(ids):
        raise ValueError("an answer is recorded once per claim")
    rows = await driver.fetch(
        ANSWER, ids, [i.token for i in items], [i.change.action for i in items],
        [i.actor for i in items], [_json(i.detail) for i in items],
        [_json(i.checked) for i in items], [float(i.delay_seconds) for i in items])
    written = _grouped(rows)
    return [written.get(transaction_id) for transaction_id in ids]


def _grouped(rows: Sequence[Any]) -> dict[str, TransactionView]:
    """The views in the rows of a statement that returns each transaction's messages beside
    its own columns (prefixed ``t_``), in order."""
    found: dict[str, tuple[Transaction, list[Message]]] = {}
    for row in rows:
        transaction_id = row[ROW + "transaction_id"]
        if transaction_id not in found:
            found[transaction_id] = (transaction_from(row, ROW), [])
        if row["message_id"] is not None:
            found[transaction_id][1].append(message_from(row))
    return {key: TransactionView(transaction, tuple(members))
            for key, (transaction, members) in found.items()}


class TransactionStore:
    """Every change runs one statement (:mod:`rms.store.transaction_sql`), on the asyncpg
    connection: concurrent requests share it (group commit, :mod:`rms.batching`), a lone
    request is a batch of one, and the check-back records its answers with it too."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._creates: Coalescer[CreateItem, TransactionView | None] = Coalescer(
            self._creator, name="transaction-prepare", max_items=200, max_inflight=4,
            item_specific=item_specific)
        self._changes: dict[str, Coalescer[ChangeItem, TransactionView | None]] = {
            action: Coalescer(self._changer(sql), name=f"transaction-{action}", max_items=500,
                              max_inflight=4, item_specific=item_specific)
            for action, sql in CHANGES.items()}

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
        own) in one statement, shared with concurrent creates. Returns ``(view, created)``;
        when the id is taken, the stored transaction with ``created=False`` (the caller
        compares content). A message id already used raises 409 and stores nothing."""
        item = CreateItem(app, draft)
        try:
            view = await self._creates.submit(item)
        except asyncpg.UniqueViolationError:  # a message id of the flush taken meanwhile
            view = await self._create_one(item)
        if view is not None:
            return view, True
        return await self._not_created(draft), False

    async def _create_one(self, item: CreateItem) -> TransactionView | None:
        """``item`` as a batch of one (a flush it shared failed for another item's id)."""
        try:
            async with driver_connection(self._engine) as driver:
                [view] = await create_many(driver, [item])
        except asyncpg.UniqueViolationError:  # its own message id taken meanwhile
            return None
        return view

    async def _not_created(self, draft: NewTransaction) -> TransactionView:
        """Why the statement stored nothing for ``draft``: the transaction stored under its
        id, or a 409 naming the first message id already used."""
        ids = [m.message_id for m in draft.messages]
        async with self._engine.connect() as conn:
            existing = await self._view(conn, draft.transaction_id)
            taken = set((await conn.execute(select(messages.c.message_id).where(
                messages.c.message_id.in_(ids)))).scalars())
        if existing is not None:
            return existing
        for index, message_id in enumerate(ids):
            if message_id in taken:
                raise Conflict(f"messages[{index}]: message id {message_id!r} is already "
                               "used; use a new message_id for a new message")
        raise Conflict(f"transaction {draft.transaction_id!r} could not be stored; retry")

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
                     app: str | None, actor: str, by: Actor) -> tuple[TransactionView, bool]:
        """A producer's or operator's confirm or cancel of the transaction and every one of
        its messages, in one statement shared with concurrent ones. Returns ``(view,
        changed)``: ``changed`` is False for a repeat (already in the target state). Raises
        NotFound (unknown, or another app's) or Conflict naming the current state."""
        item = ChangeItem(transaction_id, app, actor,
                          {"by": by.value, "transaction_id": transaction_id})
        view = await self._changes[change.action].submit(item)
        if view is not None:
            return view, True
        async with self._engine.connect() as conn:
            current = await self._view(conn, transaction_id)
        return _explain_miss(transaction_id, change, current, app), False

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

    async def answer_many(self, items: Sequence[AnswerItem]) -> list[TransactionView | None]:
        """Record check-back answers in one statement: each one's change of its transaction
        and messages, only while its claim holds, after a ``checked`` event on each of its
        messages (marked stale when the claim was lost, since the call did happen). Per item
        the changed transaction, or None when its claim was lost."""
        if not items:
            return []
        async with driver_connection(self._engine) as driver:
            return await answer_many(driver, items)


def _explain_miss(transaction_id: str, change: TransactionTransition,
                  current: TransactionView | None, app: str | None) -> TransactionView:
    if current is None or (app is not None and current.transaction.app != app):
        raise NotFound(f"no transaction {transaction_id!r}")
    state = current.transaction.state
    if state is change.target:
        return current
    raise Conflict(f"cannot {change.action} transaction {transaction_id!r}: its current "
                   f"state is {state.value!r}")
