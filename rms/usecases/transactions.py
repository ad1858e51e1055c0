"""Transactions of several messages: the producer's create / confirm / cancel / read and the
operator's confirm / cancel. The check-back of a transaction (one call per transaction, never
per message) is a subject of the one check-back loop (:mod:`rms.usecases.checkback`).

A confirmed transaction's messages are published through the one publish path in their
listed order (:meth:`rms.dispatcher.Dispatcher.deliver_in_order`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from rms import metrics
from rms.dispatcher import Dispatcher
from rms.domain.errors import Conflict, Invalid
from rms.domain.listings import ListedTransaction, TransactionFilter
from rms.domain.models import Actor, App
from rms.domain.transaction_transitions import CANCEL, CONFIRM, TransactionTransition
from rms.domain.transactions import NewTransaction, TransactionView
from rms.store.transactions import TransactionStore
from rms.usecases.drafts import CheckBackInput, ContentInput, Drafts, first_duplicate
from rms_client import tracing
from rms_client.ids import new_message_id
from rms_client.trace import TraceContext


class TransactionInput(CheckBackInput, Protocol):
    """What a transaction request carries: its id, its check-back fields and its messages."""

    @property
    def transaction_id(self) -> str | None: ...
    @property
    def messages(self) -> Sequence[ContentInput]: ...


@dataclass
class Transactions:
    drafts: Drafts
    store: TransactionStore
    dispatcher: Dispatcher

    # ---- producer side -------------------------------------------------------------------

    async def create(self, app: App, request: TransactionInput,
                     trace: TraceContext | None = None) -> tuple[TransactionView, bool]:
        """Store a pending transaction with its messages, each with ``trace`` (the request's
        W3C context, or the prepare span's when spans are recorded). An identical retry answers
        the stored transaction (``created=False``); other content under the id, another app's
        id or a message id used elsewhere is a 409."""
        with tracing.start("rms.prepare_transaction", trace, in_request=True,
                           attributes={"rms.app": app.name}) as span:
            draft = await self._draft(app, request)
            draft = replace(draft, messages=tuple(replace(m, trace=span.context)
                                                  for m in draft.messages))
            view, created = await self.store.create(app.name, draft)
        if created:
            metrics.TRANSITIONS.labels("prepared").inc(len(view.messages))
            return view, True
        stored = view.transaction
        if stored.app != app.name:
            raise Conflict(f"transaction id {draft.transaction_id!r} is already used by "
                           "another app")
        given = [item.message_id for item in request.messages]
        if not stored.same_content(draft, list(view.messages), given):
            raise Conflict(f"transaction {draft.transaction_id!r} already exists with "
                           "different content; use a new transaction_id for a new transaction")
        return view, False

    async def confirm(self, app: App, transaction_id: str) -> TransactionView:
        return await self._change(transaction_id, CONFIRM, app=app.name,
                                  actor=f"app:{app.name}", by=Actor.PRODUCER)

    async def cancel(self, app: App, transaction_id: str) -> TransactionView:
        return await self._change(transaction_id, CANCEL, app=app.name,
                                  actor=f"app:{app.name}", by=Actor.PRODUCER)

    async def get(self, transaction_id: str, *, app: App | None = None) -> TransactionView:
        return await self.store.get(transaction_id, app=None if app is None else app.name)

    # ---- operator side -------------------------------------------------------------------

    async def search(self, where: TransactionFilter, limit: int, cursor: str | None
                     ) -> tuple[list[ListedTransaction], str | None]:
        """Transactions of any app matching ``where``, oldest first, a page at a time."""
        return await self.store.search(where, limit, cursor)

    async def admin_confirm(self, transaction_id: str, *, actor: str = "admin"
                            ) -> TransactionView:
        return await self._change(transaction_id, CONFIRM, app=None, actor=actor,
                                  by=Actor.ADMIN)

    async def admin_cancel(self, transaction_id: str, *, actor: str = "admin"
                           ) -> TransactionView:
        return await self._change(transaction_id, CANCEL, app=None, actor=actor,
                                  by=Actor.ADMIN)

    # ---- helpers -------------------------------------------------------------------------

    async def _change(self, transaction_id: str, change: TransactionTransition, *,
                      app: str | None, actor: str, by: Actor) -> TransactionView:
        view, changed = await self.store.change(transaction_id, change, app=app, actor=actor,
                                                by=by)
        if changed and not await after_change(self.dispatcher, view, change, actor):
            # a publish the broker did not take: the answer states what was recorded
            return await self.store.get(transaction_id)
        return view

    async def _draft(self, app: App, request: TransactionInput) -> NewTransaction:
        if not request.messages:
            raise Invalid("a transaction holds at least one message")
        self.drafts.check_batch_size(len(request.messages))
        check_url = request.check_url or app.default_check_url
        if check_url is None:
            raise Invalid("check_url is required (the app has no default_check_url)")
        members = [await self.drafts.draft_item(app, index, item, request)
                   for index, item in enumerate(request.messages)]
        duplicate = first_duplicate([m.message_id for m in members])
        if duplicate is not None:
            raise Invalid(f"messages[{duplicate[1]}]: message_id {duplicate[0]!r} appears "
                          "twice in the transaction")
        first = members[0]
        return NewTransaction(
            transaction_id=request.transaction_id or new_message_id(),
            check_url=first.check_url or check_url, check_after_seconds=first.check_after_seconds,
            max_checks=first.max_checks, messages=tuple(members))


async def after_change(dispatcher: Dispatcher, view: TransactionView,
                       change: TransactionTransition, actor: str) -> bool:
    """What follows a confirm or cancel that changed the transaction: the metrics, and for a
    confirm the publishes of its messages, in order. Returns whether the broker took every
    publish attempted (False: ``view`` no longer states its messages)."""
    metrics.TRANSITIONS.labels("confirmed" if change is CONFIRM else "cancelled").inc(
        len(view.messages))
    if change is not CONFIRM:
        return True
    outcomes = await dispatcher.deliver_in_order(list(view.messages), actor=actor)
    return all(outcome.ok for outcome in outcomes)
