"""Messages: every state change is one guarded ``UPDATE ... WHERE state = <expected> RETURNING``
whose event row is inserted by the same statement (a data-modifying CTE), so a transition and
its history commit together and concurrent actors cannot both win.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms.domain import transitions as table
from rms.domain.errors import Conflict, IllegalTransition, NotFound, PartOfTransaction
from rms.domain.models import Actor, Message, MessageEvent, NewMessage
from rms.domain.states import State
from rms.store.coalesced import (
    SELECT_MESSAGES,
    CoalescedWrites,
    PrepareItem,
    TransitionItem,
    insert_messages,
    insert_statement,
    transition_sql,
    update_messages,
)
from rms.store.listings import decode_event_cursor, encode_event_cursor
from rms.store.raw import RawStatement, driver_connection
from rms.store.rows import message_from, to_event, to_message
from rms.store.schema import message_events, messages
from rms.store.transitions import core_values, delivery_detail, event_of, with_event

# the request path's transitions, in the one form production runs: concurrent requests share
# one statement (:mod:`rms.store.coalesced`); an ack has its own statement
# (:mod:`rms.store.subscriptions.acks`)
_STATEMENTS: dict[str, str] = {rule.action: transition_sql(rule)
                               for rule in (table.CONFIRM, table.CANCEL)}
# an admin's resend, written alone (its event names the delivery it reserved)
_RESEND = core_values(table.RESEND)


class MessageStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._coalesced = CoalescedWrites(engine)
        self._pending_count = RawStatement(
            select(func.count()).select_from(messages).where(
                messages.c.app == bindparam("app"),
                messages.c.state == State.PENDING_SEND.value), engine.dialect)

    # ---- prepare -------------------------------------------------------------------------

    async def prepare(self, app: str, draft: NewMessage, *, one_shot: bool) -> tuple[Message, bool]:
        """Store a new message. Returns ``(message, created)``; an identical retry returns the
        stored message with ``created=False``; a different message under the id raises 409.
        Concurrent prepares share one statement (:mod:`rms.store.coalesced`)."""
        stored, created = await self._coalesced.prepare(PrepareItem(app, draft), one_shot=one_shot)
        if created and stored is not None:
            return stored, True
        return _check_retry(app, draft, stored), False

    async def prepare_batch(
        self, app: str, drafts: Sequence[NewMessage], *, one_shot: bool = False
    ) -> list[tuple[Message, bool]]:
        """All or nothing: one transaction; any conflicting item rolls the whole batch back."""
        async with driver_connection(self._engine) as driver, driver.transaction():
            written = await insert_messages(
                driver, [PrepareItem(app, draft) for draft in drafts], insert_statement(one_shot))
            return [(stored, True) if created and stored is not None
                    else (_check_retry(app, draft, stored), False)
                    for draft, (stored, created) in zip(drafts, written, strict=True)]

    # ---- transitions ---------------------------------------------------------------------

    async def transition(
        self,
        message_id: str,
        change: table.Transition,
        *,
        app: str | None,
        actor: str,
        by: Actor | None = None,
    ) -> tuple[Message, bool]:
        """Apply ``change`` (the confirm or the cancel) to one message. Returns ``(message,
        changed)``: ``changed`` is False for an idempotent repeat. Raises NotFound (unknown, or
        another app's) or IllegalTransition naming the current state. Concurrent calls share
        one statement (:mod:`rms.store.coalesced`). An ack is a consumer's:
        :class:`rms.store.subscriptions.store.SubscriptionStore`."""
        sql = _statement(change)
        item = TransitionItem(message_id, app, actor, {"by": by.value} if by else {})
        current, did = await self._coalesced.transition(item, sql)
        if did and current is not None:
            return current, True
        return _explain_miss(message_id, change, current, app), False

    async def resend(self, message_id: str, *, actor: str) -> Message:
        """The RESEND transition of a ``sent`` message (dead or not), its event detail the
        delivery it reserved (or, for an ordered message, the one the sequencer will
        publish)."""
        changed = (
            update(messages)
            .where(messages.c.message_id == message_id,
                   messages.c.state == table.RESEND.source.value)
            .values(**_RESEND).returning(*messages.c).cte("changed"))
        async with self._engine.begin() as conn:
            row = (await conn.execute(with_event(changed, event_of(table.RESEND), actor,
                                                 delivery_detail, reserves=True))).first()
            if row is not None:
                return to_message(row)
            current = (await self._fetch(conn, [message_id])).get(message_id)
        return _explain_miss(message_id, table.RESEND, current, None)

    async def transition_many(
        self,
        message_ids: Sequence[str],
        change: table.Transition,
        *,
        app: str,
        actor: str,
        by: Actor,
    ) -> list[tuple[Message, bool]]:
        """``transition`` for many messages of one app in one transaction, all or nothing:
        an unknown id or an illegal state rolls everything back, naming the item."""
        sql = _statement(change)
        items = [TransitionItem(message_id, app, actor, {"by": by.value})
                 for message_id in message_ids]
        async with driver_connection(self._engine) as driver, driver.transaction():
            written = await update_messages(driver, sql, items)
            return [_batch_answer(index, message_id, change, app, current, did)
                    for index, (message_id, (current, did))
                    in enumerate(zip(message_ids, written, strict=True))]

    # ---- reads ---------------------------------------------------------------------------

    async def get(self, message_id: str, *, app: str | None = None) -> Message:
        message = (await self.get_many([message_id])).get(message_id)
        if message is None or (app is not None and message.app != app):
            raise NotFound(f"no message {message_id!r}")
        return message

    async def get_many(self, message_ids: Sequence[str]) -> dict[str, Message]:
        """The stored rows of ``message_ids`` (one statement in autocommit: a read on the
        request path needs no BEGIN and ROLLBACK round trips around it)."""
        if not message_ids:
            return {}
        rows = await SELECT_MESSAGES.fetch(self._engine, ids=list(message_ids))
        return {row["message_id"]: message_from(row) for row in rows}

    async def pending_count(self, app: str) -> int:
        """The app's pending-send messages (an index-only count on ``messages_app_state``),
        one autocommit statement compiled once."""
        [row] = await self._pending_count.fetch(self._engine, app=app)
        return int(row[0])

    async def events(self, message_id: str, limit: int | None = None,
                     cursor: str | None = None) -> tuple[list[MessageEvent], str | None]:
        """A message's events in their order, a page of at most ``limit`` after ``cursor``
        (None: all of them); the cursor of the next page, None after the last."""
        statement = select(message_events).where(message_events.c.message_id == message_id)
        if cursor is not None:
            statement = statement.where(message_events.c.id > decode_event_cursor(cursor))
        statement = statement.order_by(message_events.c.id)
        if limit is not None:
            statement = statement.limit(limit + 1)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        more = limit is not None and len(rows) > limit
        page = rows[:limit] if more else rows
        return [to_event(row) for row in page], (
            encode_event_cursor(page[-1].id) if more else None)

    async def _fetch(self, conn: AsyncConnection, ids: Sequence[str]) -> dict[str, Message]:
        if not ids:
            return {}
        statement = select(messages).where(messages.c.message_id.in_(list(ids)))
        return {row.message_id: to_message(row) for row in await conn.execute(statement)}


def _check_retry(app: str, draft: NewMessage, stored: Message | None) -> Message:
    if stored is None:  # inserted by nobody yet conflicting: cannot happen in one transaction
        raise Conflict(f"message {draft.message_id!r} could not be stored; retry")
    if stored.app != app:
        raise Conflict(f"message id {draft.message_id!r} is already used by another app")
    if stored.transaction_id is not None:  # not the same kind of message, whatever its content
        raise Conflict(f"message id {draft.message_id!r} is a message of transaction "
                       f"{stored.transaction_id!r}; use a new message_id for a message alone")
    if not stored.same_content(draft):
        raise Conflict(
            f"message {draft.message_id!r} already exists with different content; "
            "use a new message_id for a new message"
        )
    return stored


def _statement(change: table.Transition) -> str:
    found = _STATEMENTS.get(change.action)
    if found is None:
        raise ValueError(f"{change.action} is not a request-path transition of one message")
    return found


def _batch_answer(index: int, message_id: str, change: table.Transition, app: str,
                  current: Message | None, did: bool) -> tuple[Message, bool]:
    if did and current is not None:
        return current, True
    try:
        return _explain_miss(message_id, change, current, app), False
    except (NotFound, IllegalTransition) as exc:
        raise _itemised(exc, index) from exc


def _itemised(error: NotFound | IllegalTransition, index: int) -> Conflict | NotFound:
    """The same error, its detail prefixed with the batch position."""
    itemised: Conflict | NotFound = (
        NotFound(f"message_ids[{index}]: {error.detail}") if isinstance(error, NotFound)
        else Conflict(f"message_ids[{index}]: {error.detail}")
    )
    return itemised


def _explain_miss(
    message_id: str, change: table.Transition, current: Message | None, app: str | None
) -> Message:
    if current is None or (app is not None and current.app != app):
        raise NotFound(f"no message {message_id!r}")
    if current.state in change.already:
        return current
    if change.alone and current.transaction_id is not None:
        raise PartOfTransaction(message_id, change.action, current.state.value,
                                current.transaction_id)
    raise IllegalTransition(message_id, change.action, current.state.value)

