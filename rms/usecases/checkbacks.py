"""Check-back answers, the confirm worker's use case: claim due messages, ask their producers
(bounded concurrency) through a :class:`Caller`, apply each answer as soon as it arrives, and
keep the metrics an alert needs.

Answers are written by a :class:`~rms.batching.Coalescer`: the answers that arrive while one
write is running go into the next one, a single statement (:meth:`CheckStore.resolve_many`)
whatever their number, each still guarded by its own claim token. The publishes of confirmed
messages go through the dispatcher, whose bookkeeping is coalesced the same way.

A tick keeps claiming while batches come back full, so a backlog drains at the speed of the
producers rather than one batch per interval. ``tick`` is a plain coroutine: the scheduler
calls it in production, tests call it directly.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

import structlog

from rms import metrics
from rms.batching import Coalescer
from rms.config import WorkerSettings
from rms.delivery import Dispatcher
from rms.domain.models import App, Message
from rms.domain.policy import DeliveryPolicy, next_check_delay
from rms.domain.states import DeadReason
from rms.store.checks import Action, Answer, CheckStore, Claim, Resolution, Resolved
from rms_client import tracing
from rms_client.trace import TraceContext

log = structlog.get_logger(__name__)
DEAD = DeadReason.CHECK_EXHAUSTED.value


class Outcome(StrEnum):
    """A producer's answer (design section 5); anything else counts as ``unknown``."""

    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class CheckResult:
    outcome: Outcome
    error: str | None = None
    called: bool = True  # False when the guard refused before any connection


def count_answer(result: CheckResult, elapsed: float, *, attempt: int, **names: str) -> None:
    """The metrics and the log line of one check-back answer (``names``: what was asked)."""
    metrics.CHECKS.labels(result.outcome.value).inc()
    if result.called:
        metrics.CHECK_SECONDS.observe(elapsed)
    log.info("check.answered", **names, attempt=attempt, outcome=result.outcome.value,
             error=result.error, seconds=round(elapsed, 4))


class Caller(Protocol):
    """Asks a message's producer about it; never raises for what the producer does. The call
    carries ``message.trace`` (the check-back span's context) as W3C headers."""

    async def check(self, message: Message, app: App) -> CheckResult: ...


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """The knobs of a confirm worker's tick."""

    batch_size: int
    lease_seconds: float
    concurrency: int
    check_backoff_cap_seconds: float

    @classmethod
    def from_settings(cls, settings: WorkerSettings) -> CheckSettings:
        return cls(settings.worker_batch_size, settings.worker_lease_seconds,
                   settings.worker_concurrency, settings.check_backoff_cap_seconds)


class Ticker(Protocol):
    async def tick(self) -> int: ...


class ConfirmWorker:
    def __init__(self, settings: CheckSettings, store: CheckStore, caller: Caller,
                 dispatcher: Dispatcher, actor: str, *, transactions: Ticker | None = None
                 ) -> None:
        self._transactions = transactions  # the check-back of transactions, one per tick
        self._settings = settings
        self._store = store
        self._caller = caller
        self._dispatcher = dispatcher
        self._actor = actor
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._waiting = 0  # started checks still waiting for a slot
        self._all_started = asyncio.Event()
        self._answers: Coalescer[Resolution, Resolved] = Coalescer(store.resolve_many,
                                                                    name="answers")

    async def tick(self) -> int:
        """Check everything due now (messages, then transactions); returns how many were
        claimed.

        Batches overlap: the next batch is claimed as soon as every call of the current one
        has started (holds a concurrency slot), so the slots stay busy while the last calls of
        a batch finish. Claimed messages wait for a slot at most one batch long."""
        total = 0
        checks: set[asyncio.Task[None]] = set()
        try:
            while True:
                claimed = await self.start_batch(checks)
                total += claimed
                if claimed < self._settings.batch_size:
                    break
                await self._all_started.wait()
        finally:
            await asyncio.gather(*checks)
        if self._transactions is not None:
            total += await self._transactions.tick()
        return total

    async def start_batch(self, checks: set[asyncio.Task[None]]) -> int:
        """Claim one batch and start its checks (added to ``checks`` until done); returns its
        size."""
        metrics.OLDEST_DUE_CHECK_LAG.set(await self._store.oldest_due_lag())
        claim = await self._store.claim(self._settings.batch_size, self._settings.lease_seconds,
                                        self._actor)
        metrics.CHECK_BATCH.observe(len(claim.messages))
        for message in claim.exhausted:
            self._count_dead(message, attempt=message.check_count, at_claim=True)
        if claim.messages:
            apps = await self._store.apps([m.app for m in claim.messages])
            self._all_started.clear()
            self._waiting += len(claim.messages)
            for message in claim.messages:
                task = asyncio.create_task(self._check(claim, message, apps[message.app]))
                checks.add(task)
                task.add_done_callback(checks.discard)
        return len(claim.messages) + len(claim.exhausted)

    async def _check(self, claim: Claim, message: Message, app: App) -> None:
        async with self._slots:
            self._waiting -= 1
            if self._waiting == 0:
                self._all_started.set()
            started = time.perf_counter()
            with tracing.start("rms.check-back", message.trace, kind="client", attributes={
                    "rms.app": message.app, "rms.message_id": message.message_id,
                    "rms.check_count": message.check_count}) as span:
                result = await self._caller.check(replace(message, trace=span.context), app)
                span.set("rms.outcome", result.outcome.value)
                if result.error is not None:
                    span.fail(result.error)
            count_answer(result, time.perf_counter() - started, attempt=message.check_count,
                         message_id=message.message_id, app=message.app)
            try:
                await self._apply(claim.token, message, result, span.context)
            except Exception:  # the claim expires and the message is checked again
                log.exception("check.apply_failed", message_id=message.message_id,
                              app=message.app, attempt=message.check_count)

    async def _apply(self, token: str, message: Message, result: CheckResult,
                     trace: TraceContext | None) -> None:
        action, delay = self._action(message, result.outcome)
        answer = Answer(message.check_count, result.outcome.value, result.error)
        resolved = await self._answers.submit(Resolution(
            message.message_id, token, self._actor, action, answer, delay))
        if not resolved.applied:
            return self._note_lost(message)
        if action is Action.EXHAUST:
            return self._count_dead(message, attempt=message.check_count, at_claim=False)
        if action is Action.CANCEL:
            return metrics.TRANSITIONS.labels("cancelled").inc()
        if resolved.sent is not None:
            metrics.TRANSITIONS.labels("confirmed").inc()
            await self._dispatcher.deliver_confirmed(resolved.sent, actor=self._actor,
                                                     parent=trace)
        return None

    def _action(self, message: Message, outcome: Outcome) -> tuple[Action, float]:
        """What the answer does, and (for a retry) after how many seconds. ``check_count``
        already counts this call, so the last allowed call that answers unknown exhausts."""
        if outcome is Outcome.COMMITTED:
            return Action.CONFIRM, 0.0
        if outcome is Outcome.ROLLED_BACK:
            return Action.CANCEL, 0.0
        if message.check_count >= message.max_checks:
            return Action.EXHAUST, 0.0
        return Action.RETRY, next_check_delay(self._policy(message), message.check_count)

    def _policy(self, message: Message) -> DeliveryPolicy:
        return DeliveryPolicy(check_after_seconds=message.check_after_seconds,
                              check_backoff_cap_seconds=self._settings.check_backoff_cap_seconds)

    def _count_dead(self, message: Message, *, attempt: int, at_claim: bool) -> None:
        metrics.DEAD_LETTERS.labels(DEAD).inc()
        log.warning("check.exhausted", message_id=message.message_id, app=message.app,
                    attempt=attempt, reason=DEAD, unanswered_last_attempt=at_claim)

    def _note_lost(self, message: Message) -> None:
        """A guard miss: the lease expired (another worker owns the message now) or the
        producer/operator resolved it meanwhile. Nothing was overwritten."""
        log.warning("check.claim_lost", message_id=message.message_id, app=message.app,
                        attempt=message.check_count)
