"""Transactions of several messages: the producer's create / confirm / cancel / read, the
operator's confirm / cancel, and the confirm worker's check-back of a transaction (one call
per transaction, never per message).

A confirmed transaction's messages are published through the one publish path in their
listed order (:meth:`rms.delivery.Dispatcher.deliver_in_order`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

import structlog

from rms import metrics
from rms.delivery import Dispatcher
from rms.domain.errors import Conflict, Invalid
from rms.domain.listings import ListedTransaction, TransactionFilter
from rms.domain.models import Actor, App
from rms.domain.policy import DeliveryPolicy, next_check_delay
from rms.domain.states import DeadReason
from rms.domain.transactions import (
    CANCEL,
    CONFIRM,
    NewTransaction,
    Transaction,
    TransactionChange,
    TransactionView,
)
from rms.store.transactions import (
    ClaimLost,
    TransactionStore,
)
from rms.usecases.checkbacks import CheckResult, CheckSettings, Outcome, count_answer
from rms.usecases.drafts import CheckBackInput, ContentInput, Drafts, first_duplicate
from rms_client import tracing
from rms_client.ids import new_message_id
from rms_client.trace import TraceContext

log = structlog.get_logger(__name__)


class TransactionInput(CheckBackInput, Protocol):
    """What a transaction request carries: its id, its check-back fields and its messages."""

    @property
    def transaction_id(self) -> str | None: ...
    @property
    def messages(self) -> Sequence[ContentInput]: ...


@dataclass(frozen=True, slots=True)
class _Member:
    """A member as a prepare request (:class:`rms.usecases.drafts.PrepareInput`), carrying the
    transaction's check-back fields, so it is validated exactly as a prepare is."""

    message_id: str | None
    topic: str
    key: str | None
    payload: Any
    headers: dict[str, str]
    check_url: str | None
    check_after_seconds: float | None
    max_checks: int | None
    ack_timeout_seconds: float | None
    max_deliveries: int | None
    deliver_after: datetime | None
    delay_seconds: float | None


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

    async def _change(self, transaction_id: str, change: TransactionChange, *,
                      app: str | None, actor: str, by: Actor) -> TransactionView:
        view, changed = await self.store.change(transaction_id, change, app=app, actor=actor,
                                                by=by)
        if changed:
            await after_change(self.dispatcher, view, change, actor)
        return view

    async def _draft(self, app: App, request: TransactionInput) -> NewTransaction:
        if not request.messages:
            raise Invalid("a transaction holds at least one message")
        self.drafts.check_batch_size(len(request.messages))
        check_url = request.check_url or app.default_check_url
        if check_url is None:
            raise Invalid("check_url is required (the app has no default_check_url)")
        members = [
            await self.drafts.draft_item(app, index, _Member(
                item.message_id or new_message_id(), item.topic, item.key, item.payload,
                item.headers, check_url, request.check_after_seconds, request.max_checks,
                item.ack_timeout_seconds, item.max_deliveries, item.deliver_after,
                item.delay_seconds))
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
                       change: TransactionChange, actor: str) -> None:
    """What follows a confirm or cancel that changed the transaction: the metrics, and for a
    confirm the publishes of its messages, in order."""
    metrics.TRANSITIONS.labels("confirmed" if change is CONFIRM else "cancelled").inc(
        len(view.messages))
    if change is CONFIRM:
        await dispatcher.deliver_in_order(list(view.messages), actor=actor)


class TransactionCaller(Protocol):
    """Asks a transaction's producer about it; never raises for what the producer does."""

    async def check_transaction(self, transaction: Transaction, app: App,
                                trace: TraceContext | None = None) -> CheckResult: ...


AppsOf = Callable[[Sequence[str]], Awaitable[dict[str, App]]]


class TransactionChecks:
    """The confirm worker's check-back of transactions: claim due ones, ask each producer once
    per transaction, and confirm, cancel, retry or flag dead all its messages together."""

    def __init__(self, settings: CheckSettings, store: TransactionStore, apps: AppsOf,
                 caller: TransactionCaller, dispatcher: Dispatcher, actor: str) -> None:
        self._settings = settings
        self._store = store
        self._apps = apps
        self._caller = caller
        self._dispatcher = dispatcher
        self._actor = actor
        self._slots = asyncio.Semaphore(settings.concurrency)

    async def tick(self) -> int:
        """Check every due transaction; returns how many were claimed."""
        total = 0
        while True:
            claim = await self._store.claim(self._settings.batch_size,
                                            self._settings.lease_seconds, self._actor)
            for view in claim.exhausted:
                self._count_dead(view.transaction, at_claim=True)
            if claim.claimed:
                apps = await self._apps([v.transaction.app for v in claim.claimed])
                await asyncio.gather(*(self._check(claim.token, view, apps[view.transaction.app])
                                       for view in claim.claimed))
            claimed = len(claim.claimed) + len(claim.exhausted)
            total += claimed
            if claimed < self._settings.batch_size:
                return total

    async def _check(self, token: str, view: TransactionView, app: App) -> None:
        transaction = view.transaction
        async with self._slots:
            started = time.perf_counter()
            with tracing.start("rms.check-back", view.trace, kind="client", attributes={
                    "rms.app": transaction.app, "rms.transaction_id": transaction.transaction_id,
                    "rms.check_count": transaction.check_count}) as span:
                result = await self._caller.check_transaction(transaction, app, span.context)
                span.set("rms.outcome", result.outcome.value)
                if result.error is not None:
                    span.fail(result.error)
        count_answer(result, time.perf_counter() - started, attempt=transaction.check_count,
                     transaction_id=transaction.transaction_id, app=app.name)
        try:
            await self._apply(token, transaction, result)
        except Exception:  # the claim expires and the transaction is checked again
            log.exception("check.apply_failed", transaction_id=transaction.transaction_id,
                          app=app.name, attempt=transaction.check_count)

    async def _apply(self, token: str, transaction: Transaction, result: CheckResult) -> None:
        checked: dict[str, Any] = {"attempt": transaction.check_count,
                                   "outcome": result.outcome.value}
        if result.error:
            checked["error"] = result.error
        transaction_id = transaction.transaction_id
        if result.outcome is Outcome.UNKNOWN:
            if transaction.check_count >= transaction.max_checks:
                if await self._store.exhaust(transaction_id, token, self._actor, checked):
                    self._count_dead(transaction, at_claim=False)
                return None
            delay = next_check_delay(self._policy(transaction), transaction.check_count)
            await self._store.retry(transaction_id, token, delay, self._actor, checked)
            return None
        change = CONFIRM if result.outcome is Outcome.COMMITTED else CANCEL
        try:
            view, changed = await self._store.change(
                transaction_id, change, app=None, actor=self._actor, by=Actor.CHECK_BACK,
                claim_token=token, checked=checked)
        except ClaimLost:
            log.warning("check.claim_lost", transaction_id=transaction_id,
                        app=transaction.app, attempt=transaction.check_count)
            return await self._store.lost_claim(transaction_id, self._actor, checked)
        if changed:
            await after_change(self._dispatcher, view, change, self._actor)
        return None

    def _policy(self, transaction: Transaction) -> DeliveryPolicy:
        return DeliveryPolicy(check_after_seconds=transaction.check_after_seconds,
                              check_backoff_cap_seconds=self._settings.check_backoff_cap_seconds)

    def _count_dead(self, transaction: Transaction, *, at_claim: bool) -> None:
        reason = DeadReason.CHECK_EXHAUSTED.value
        metrics.DEAD_LETTERS.labels(reason).inc(len(transaction.message_ids))
        log.warning("check.exhausted", transaction_id=transaction.transaction_id,
                    app=transaction.app, attempt=transaction.check_count, reason=reason,
                    unanswered_last_attempt=at_claim)
