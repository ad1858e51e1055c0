"""Check-back, the check-back worker's use case: claim what is due, ask its producer (bounded
concurrency) through a :class:`Caller`, apply each answer as soon as it arrives, and
keep the metrics an alert needs.

One loop serves both things a producer is asked about: a message prepared on its own
(:class:`MessageCheckBacks`) and a transaction of several messages, asked about once for all
of them (:class:`TransactionCheckBacks`). Each is a :class:`Subject`: its claim, its call and
how a decided action is written; the rule that turns an answer into an action is
:func:`rms.domain.checkback.decide`.

The answers of messages are written by a :class:`~rms.batching.Coalescer`: the answers that
arrive while one write is running go into the next one, a single statement
(:meth:`CheckBackStore.resolve_many`) whatever their number, each still guarded by its own
claim token. The first publishes of the messages those answers confirmed are coalesced the same
way: handed to the producer together (:meth:`Dispatcher.publish_many`), their outcomes written by
one statement (:meth:`Dispatcher.record`).

A tick keeps claiming while batches come back full, so a backlog drains at the speed of the
producers rather than one batch per interval. ``tick`` is a plain coroutine: the scheduler
calls it in production, tests call it directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

import structlog

from rms import metrics
from rms.batching import Coalescer
from rms.config import WorkerSettings
from rms.dispatcher import Dispatcher, reserved
from rms.domain.checkback import Action, Asked, Outcome, decide
from rms.domain.models import App, Message, PublishOutcome
from rms.domain.states import DeadReason
from rms.domain.transaction_transitions import (
    CANCEL,
    CHECK_EXHAUSTED,
    CONFIRM,
    RETRY_CHECK,
    TransactionTransition,
)
from rms.domain.transactions import Transaction, TransactionView
from rms.store.checkback import Answer, CheckBackStore, Resolution, Resolved
from rms.store.transactions import AnswerItem, TransactionStore
from rms.usecases.transactions import after_change
from rms_client import tracing
from rms_client.trace import TraceContext

log = structlog.get_logger(__name__)
DEAD = DeadReason.CHECK_EXHAUSTED.value
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CheckResult:
    outcome: Outcome
    error: str | None = None
    called: bool = True  # False when the guard refused before any connection


class Caller(Protocol):
    """Asks a producer about a message or a transaction; never raises for what the producer
    does. The call carries the check-back span's context as W3C headers."""

    async def check(self, message: Message, app: App,
                    trace: TraceContext | None) -> CheckResult: ...

    async def check_transaction(self, transaction: Transaction, app: App,
                                trace: TraceContext | None = None) -> CheckResult: ...


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """The knobs of a check-back worker's tick."""

    batch_size: int
    lease_seconds: float
    concurrency: int
    check_backoff_cap_seconds: float

    @classmethod
    def from_settings(cls, settings: WorkerSettings) -> CheckSettings:
        return cls(settings.worker_batch_size, settings.worker_lease_seconds,
                   settings.worker_concurrency, settings.check_backoff_cap_seconds)


@dataclass(frozen=True, slots=True)
class Batch(Generic[T]):
    """One claim: ``due`` are to be asked now (their ``check_count`` already counts this
    call); ``exhausted`` were due with no call left (the worker that made their last call died
    before recording its answer) and were flagged dead instead of asked again."""

    token: str
    due: list[T]
    exhausted: list[T]


class Subject(Protocol[T]):
    """What a check-back asks about: how it is claimed, named, asked, and how the action
    decided for an answer is written (False: the claim was lost, nothing was changed)."""

    async def claim(self, limit: int, lease_seconds: float, actor: str) -> Batch[T]: ...
    def asked(self, item: T) -> Asked: ...
    def app(self, item: T) -> str: ...
    def names(self, item: T) -> dict[str, str]: ...
    def trace(self, item: T) -> TraceContext | None: ...
    def messages(self, item: T) -> int: ...
    async def call(self, item: T, app: App, trace: TraceContext | None) -> CheckResult: ...
    async def apply(self, token: str, item: T, action: Action, delay: float,
                    answer: Answer, trace: TraceContext | None) -> bool: ...


AppsOf = Callable[[Sequence[str]], Awaitable[dict[str, App]]]


class CheckBackWorker:
    """The one check-back loop: every tick asks about the due items of each subject in turn
    (messages, then transactions)."""

    def __init__(self, settings: CheckSettings, subjects: Sequence[Subject[Any]],
                 apps: AppsOf, lag: Callable[[], Awaitable[float]], actor: str) -> None:
        self._settings = settings
        self._subjects = subjects
        self._apps = apps
        self._lag = lag
        self._actor = actor
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._waiting = 0  # started checks still waiting for a slot
        self._all_started = asyncio.Event()

    async def tick(self) -> int:
        """Check everything due now; returns how many were claimed."""
        total = 0
        for subject in self._subjects:
            total += await self._drain(subject)
        return total

    async def _drain(self, subject: Subject[Any]) -> int:
        """Claim and ask until a batch comes back short. Batches overlap: the next batch is
        claimed as soon as every call of the current one has started (holds a concurrency
        slot), so the slots stay busy while the last calls of a batch finish. Claimed items
        wait for a slot at most one batch long."""
        total = 0
        checks: set[asyncio.Task[None]] = set()
        try:
            while True:
                claimed = await self._start_batch(subject, checks)
                total += claimed
                if claimed < self._settings.batch_size:
                    break
                await self._all_started.wait()
        finally:
            await asyncio.gather(*checks)
        return total

    async def _start_batch(self, subject: Subject[T], checks: set[asyncio.Task[None]]) -> int:
        """Claim one batch and start its checks (added to ``checks`` until done); returns its
        size."""
        metrics.OLDEST_DUE_CHECK_LAG.set(await self._lag())
        batch = await subject.claim(self._settings.batch_size, self._settings.lease_seconds,
                                    self._actor)
        metrics.CHECK_BATCH.observe(len(batch.due))
        for item in batch.exhausted:
            self._count_dead(subject, item, at_claim=True)
        if batch.due:
            apps = await self._apps([subject.app(item) for item in batch.due])
            self._all_started.clear()
            self._waiting += len(batch.due)
            for item in batch.due:
                task = asyncio.create_task(
                    self._check(subject, batch.token, item, apps[subject.app(item)]))
                checks.add(task)
                task.add_done_callback(checks.discard)
        return len(batch.due) + len(batch.exhausted)

    async def _check(self, subject: Subject[T], token: str, item: T, app: App) -> None:
        asked = subject.asked(item)
        names = subject.names(item)
        async with self._slots:
            self._waiting -= 1
            if self._waiting == 0:
                self._all_started.set()
            started = time.perf_counter()
            attributes: dict[str, Any] = {"rms.app": app.name, "rms.check_count":
                                          asked.check_count}
            attributes |= {f"rms.{name}": value for name, value in names.items()}
            with tracing.start("rms.check-back", subject.trace(item), kind="client",
                               attributes=attributes) as span:
                result = await _answer_of(subject, item, app, span.context)
                span.set("rms.outcome", result.outcome.value)
                if result.error is not None:
                    span.fail(result.error)
            self._count_answer(result, time.perf_counter() - started, asked, names, app)
            try:
                await self._apply(subject, token, item, result, span.context)
            except Exception:  # the claim expires and the item is checked again
                log.exception("check.apply_failed", **names, app=app.name,
                              attempt=asked.check_count)

    async def _apply(self, subject: Subject[T], token: str, item: T, result: CheckResult,
                     trace: TraceContext | None) -> None:
        asked = subject.asked(item)
        action, delay = decide(result.outcome, asked, self._settings.check_backoff_cap_seconds)
        answer = Answer(asked.check_count, result.outcome.value, result.error)
        if not await subject.apply(token, item, action, delay, answer, trace):
            # the lease expired (another worker owns it now) or the producer or an operator
            # resolved it meanwhile: nothing was overwritten
            log.warning("check.claim_lost", **subject.names(item), app=subject.app(item),
                        attempt=asked.check_count)
        elif action is Action.EXHAUST:
            self._count_dead(subject, item, at_claim=False)

    @staticmethod
    def _count_answer(result: CheckResult, elapsed: float, asked: Asked,
                      names: dict[str, str], app: App) -> None:
        metrics.CHECKS.labels(result.outcome.value).inc()
        if result.called:
            metrics.CHECK_SECONDS.observe(elapsed)
        log.info("check.answered", **names, app=app.name, attempt=asked.check_count,
                 outcome=result.outcome.value, error=result.error, seconds=round(elapsed, 4))

    @staticmethod
    def _count_dead(subject: Subject[T], item: T, *, at_claim: bool) -> None:
        metrics.DEAD_LETTERS.labels(DEAD).inc(subject.messages(item))
        log.warning("check.exhausted", **subject.names(item), app=subject.app(item),
                    attempt=subject.asked(item).check_count, reason=DEAD,
                    unanswered_last_attempt=at_claim)


class MessageCheckBacks:
    """The check-back of messages prepared on their own: one call per message."""

    def __init__(self, store: CheckBackStore, caller: Caller, dispatcher: Dispatcher,
                 actor: str) -> None:
        self._store = store
        self._caller = caller
        self._dispatcher = dispatcher
        self._actor = actor
        self._answers: Coalescer[Resolution, Resolved] = Coalescer(store.resolve_many,
                                                                    name="answers")
        # the first publishes of the messages that answers confirmed: those of one write of
        # answers go to the producer together and their outcomes are written by one statement
        # (a failed write is every item's answer: publishing each again alone would repeat
        # the records)
        self._publishes: Coalescer[Message, PublishOutcome] = Coalescer(
            self._publish_confirmed, name="first-publishes", max_inflight=4,
            item_specific=_never)

    async def claim(self, limit: int, lease_seconds: float, actor: str) -> Batch[Message]:
        claim = await self._store.claim(limit, lease_seconds, actor)
        return Batch(claim.token, claim.messages, claim.exhausted)

    def asked(self, item: Message) -> Asked:
        return Asked(item.check_count, item.max_checks, item.check_after_seconds)

    def app(self, item: Message) -> str:
        return item.app

    def names(self, item: Message) -> dict[str, str]:
        return {"message_id": item.message_id}

    def trace(self, item: Message) -> TraceContext | None:
        return item.trace

    def messages(self, item: Message) -> int:
        return 1

    async def call(self, item: Message, app: App, trace: TraceContext | None) -> CheckResult:
        return await self._caller.check(item, app, trace)

    async def apply(self, token: str, item: Message, action: Action, delay: float,
                    answer: Answer, trace: TraceContext | None) -> bool:
        resolved = await self._answers.submit(Resolution(
            item.message_id, token, self._actor, action, answer, delay))
        if not resolved.applied:
            return False
        if action is Action.CANCEL:
            metrics.TRANSITIONS.labels("cancelled").inc()
        if resolved.sent is not None:
            metrics.TRANSITIONS.labels("confirmed").inc()
            await self._deliver(resolved.sent, trace)
        return True

    async def _deliver(self, sent: Message, trace: TraceContext | None) -> None:
        """The first publish of a message the answer confirmed (as
        :meth:`Dispatcher.deliver_confirmed`, its span under the check-back's span ``trace``),
        returning once its outcome is recorded."""
        if not reserved(sent):  # delayed or ordered: published later by the redelivery worker
            await self._dispatcher.deliver_confirmed(sent, actor=self._actor, parent=trace)
            return
        await self._publishes.submit(sent if trace is sent.trace else replace(sent, trace=trace))

    async def _publish_confirmed(self, batch: Sequence[Message]) -> list[PublishOutcome]:
        outcomes = await self._dispatcher.publish_many(batch)
        await self._dispatcher.record(batch, outcomes, actor=self._actor, reschedule=False)
        return outcomes


async def _answer_of(subject: Subject[T], item: T, app: App,
                     trace: TraceContext | None) -> CheckResult:
    """The call's result; whatever the producer's answer made the call raise (a fault the
    caller did not foresee) is an ``unknown`` answer with its reason, so every call ends in a
    counted outcome and the item's retries stay bounded by ``max_checks``."""
    try:
        return await subject.call(item, app, trace)
    except Exception as exc:  # the answer alone decides this call, never the worker
        log.exception("check.call_raised", **subject.names(item), app=app.name)
        return CheckResult(Outcome.UNKNOWN, f"{type(exc).__name__}: {exc}"[:300])


def _never(_: Exception) -> bool:
    return False


# the change of a transaction each check-back decision makes
_TRANSACTION_ANSWERS: dict[Action, TransactionTransition] = {
    Action.CONFIRM: CONFIRM, Action.CANCEL: CANCEL, Action.RETRY: RETRY_CHECK,
    Action.EXHAUST: CHECK_EXHAUSTED}


class TransactionCheckBacks:
    """The check-back of transactions: one call per transaction, never per message, and the
    answer confirms, cancels, retries or flags dead all its messages together."""

    def __init__(self, store: TransactionStore, caller: Caller, dispatcher: Dispatcher,
                 actor: str) -> None:
        self._store = store
        self._caller = caller
        self._dispatcher = dispatcher
        self._actor = actor

    async def claim(self, limit: int, lease_seconds: float, actor: str
                    ) -> Batch[TransactionView]:
        claim = await self._store.claim(limit, lease_seconds, actor)
        return Batch(claim.token, claim.claimed, claim.exhausted)

    def asked(self, item: TransactionView) -> Asked:
        t = item.transaction
        return Asked(t.check_count, t.max_checks, t.check_after_seconds)

    def app(self, item: TransactionView) -> str:
        return item.transaction.app

    def names(self, item: TransactionView) -> dict[str, str]:
        return {"transaction_id": item.transaction.transaction_id}

    def trace(self, item: TransactionView) -> TraceContext | None:
        return item.trace

    def messages(self, item: TransactionView) -> int:
        return len(item.transaction.message_ids)

    async def call(self, item: TransactionView, app: App, trace: TraceContext | None
                   ) -> CheckResult:
        return await self._caller.check_transaction(item.transaction, app, trace)

    async def apply(self, token: str, item: TransactionView, action: Action, delay: float,
                    answer: Answer, trace: TraceContext | None) -> bool:
        change = _TRANSACTION_ANSWERS[action]
        [view] = await self._store.answer_many([AnswerItem(
            item.transaction.transaction_id, token, change, self._actor, answer.detail,
            delay)])
        if view is None:
            return False
        if change in (CONFIRM, CANCEL):
            await after_change(self._dispatcher, view, change, self._actor)
        return True
