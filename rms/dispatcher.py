"""The one publish path: producer confirm, check-back confirm, one-shot send, recovery
re-delivery and admin resend all hand a message whose delivery number is reserved to
:meth:`Dispatcher.deliver` (or, a worker's batch, :meth:`Dispatcher.publish_many` then
:meth:`Dispatcher.record`).

The broker's answers are written by a :class:`~rms.batching.Coalescer`: concurrent deliveries
(concurrent API confirms, a worker's batch) share one statement per flush, and each call still
returns only after its own outcome is durably recorded.

A first publish may also be handed off (:meth:`Dispatcher.hand_off`): it then runs after the
request that committed the confirm was answered (``RMS_CONFIRM_ANSWER=committed``). Its
delivery is reserved by the confirming statement, so a process that dies before recording the
broker's answer leaves a message the redelivery worker publishes at its ack deadline, as after
any unknown publish.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from rms import metrics
from rms.batching import Coalescer
from rms.config import WorkerSettings
from rms.domain import phase
from rms.domain.models import Message, PublishOutcome
from rms.domain.ordering import Blocked
from rms.domain.policy import DeliveryPolicy, ack_deadline
from rms.kafka.failures import PublishFailure
from rms.kafka.publisher import Publisher, PublishError
from rms.kafka.records import build_record
from rms.kafka.transactional import AtomicPublisher, die_after
from rms.store.dispatch import DispatchStore, Recorded
from rms_client import tracing
from rms_client.trace import TraceContext

log = structlog.get_logger(__name__)
# the failure reason of a transaction's message held back behind an earlier unpublished one
HELD_FOR_ORDER = Blocked.HELD_FOR_ORDER.value


def sequenced(message: Message) -> bool:
    """Whether ``message`` is left to the ordering sequencer (in the redelivery worker): an
    ordered message is published only there, in confirm order per key (its confirm, one-shot
    send or resend reserves no delivery and makes it due at once), never by the request that
    confirmed it."""
    return phase.holds(phase.ORDERED, message)


def reserved(message: Message) -> bool:
    """Whether the statement that made ``message`` due reserved its delivery (not for a delayed
    message before its time, nor an ordered one): this publish path makes it now."""
    return phase.holds(phase.RESERVED, message)


def dispatcher_for(publisher: Publisher, engine: AsyncEngine, settings: WorkerSettings,
                   atomic: AtomicPublisher | None = None) -> Dispatcher:
    """The dispatcher of one process: its publisher (and, in a process that confirms
    transactions, its transactional producers), its engine, the deployment's policy."""
    return Dispatcher(publisher, DispatchStore(engine), settings.publish_retry_seconds,
                      settings.delivery_backoff_cap_seconds, atomic=atomic,
                      exit_after=settings.fault_exit_after_transaction_records)


class Dispatcher:
    def __init__(self, publisher: Publisher, store: DispatchStore, retry_seconds: float,
                 backoff_cap_seconds: float, *, atomic: AtomicPublisher | None = None,
                 exit_after: int = 0) -> None:
        self._publisher = publisher
        self._atomic = atomic
        self._exit_after = exit_after  # the test suite's fault (RMS_FAULT_EXIT_AFTER_...)
        self._store = store
        self._retry_seconds = retry_seconds
        self._cap = backoff_cap_seconds
        # several flushes at once, as on the request path: each waits for its commit (an fsync),
        # and a confirm's answer waits for its `published` event
        self._writer: Coalescer[Recorded, bool] = Coalescer(store.record_many, name="deliveries",
                                                            max_inflight=4)
        self._handed_off: set[asyncio.Task[object]] = set()

    def hand_off(self, delivery: Coroutine[Any, Any, object], *, message_id: str) -> None:
        """Run ``delivery`` (a first publish and its record) in the background: the request
        that reserved it answers without waiting. A failure is logged; the message stays
        reserved for the redelivery worker."""
        task = asyncio.create_task(delivery, name=f"deliver {message_id}")
        self._handed_off.add(task)
        task.add_done_callback(self._delivered)

    def _delivered(self, task: asyncio.Task[object]) -> None:
        self._handed_off.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            log.warning("publish.handed_off_failed", message_id=task.get_name()[8:],
                        error=f"{type(error).__name__}: {error}")

    async def drain(self, timeout_seconds: float) -> None:
        """Wait for the handed-off deliveries (at shutdown, before the publisher stops); one
        still running after ``timeout_seconds`` is cancelled and left to the redelivery
        worker."""
        if not self._handed_off:
            return
        _, running = await asyncio.wait(set(self._handed_off), timeout=timeout_seconds)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def deliver(self, message: Message, *, actor: str, reschedule: bool,
                      parent: TraceContext | None = None, span: str = "rms.publish"
                      ) -> PublishOutcome:
        """Publish delivery number ``message.delivery_count`` and record the broker's answer;
        returns once that answer is durably recorded.

        ``reschedule``: set the ack deadline after an accepted publish (redelivery, resend); the
        confirm path set it already in the confirming statement. The publish is the span
        ``span`` under ``parent`` (default: the message's stored trace context); the record
        carries that span's context.
        """
        outcome = await self._publish(message, parent=parent, span=span)
        recorded = self.recorded(message, outcome, actor=actor, reschedule=reschedule)
        await self._writer.submit(recorded)
        return outcome

    async def deliver_in_order(self, batch: Sequence[Message], *, actor: str
                               ) -> list[PublishOutcome]:
        """Publish the confirmed messages of a transaction in their order and record every
        outcome in one write (each message stays claimed until its accepted publish is
        recorded, which sets its ack deadline).

        The run of members with a delivery reserved, up to the first without one (a delayed
        one before its time, an ordered one: published later by the redelivery worker), is the
        transaction's atomic publish: one Kafka transaction when there are several and the
        process has transactional producers; an aborted one gives every member's number back,
        a commit whose answer never came records nothing (the members stay reserved for the
        redelivery worker). Without transactional producers the run goes one after another,
        each once the broker accepted the one before, and stops at the first failure. The
        reserved members not published now are recorded as held back (reason
        ``held-for-order``; their numbers given back like a failed publish's), and the
        redelivery worker publishes them in order (:data:`rms.domain.phase.HELD_FOR_ORDER`)."""
        run: list[Message] = []
        for message in batch:
            if not reserved(message):
                break
            run.append(message)
        after = [m for m in batch[len(run):] if reserved(m)]
        waiting = batch[len(run)].message_id if len(run) < len(batch) else ""
        if self._atomic is not None and len(run) > 1:
            atomic = await self._publish_atomically(run)
            recorded, outcomes = (run, atomic) if atomic is not None else ([], [])
            answer = atomic if atomic is not None else [_unknown(m) for m in run]
            rest = after
        else:
            outcomes = []
            for message in run:
                outcomes.append(await self._publish(message))
                if len(outcomes) == self._exit_after:
                    await die_after()
                if not outcomes[-1].ok:
                    waiting = message.message_id
                    break
            recorded, answer = run[:len(outcomes)], outcomes
            rest = run[len(outcomes):] + after
        held = [_held(m, waiting) for m in rest]
        await self.record(recorded + rest, outcomes + held, actor=actor, reschedule=True)
        return answer + held

    async def _publish_atomically(self, run: Sequence[Message]) -> list[PublishOutcome] | None:
        """One Kafka transaction for ``run`` (each record a span of its own); None when the
        commit's outcome is unknown."""
        assert self._atomic is not None
        spans = _spans("rms.publish", run, [m.trace for m in run])
        records = [build_record(message, message.delivery_count, publishing.context)
                   for message, publishing in zip(run, spans, strict=True)]
        try:
            result = await self._atomic.publish_atomically(records)
        except BaseException as exc:
            _end_failed(spans, exc)
            raise
        failures = result.failures or (None,) * len(run)
        for publishing, failure in zip(spans, failures, strict=True):
            if result.outcome == "unknown":
                publishing.fail("unknown")
            elif failure is not None:
                publishing.fail(failure.reason)
            publishing.end()
        if result.outcome == "unknown":
            log.warning("publish.outcome_unknown", message_ids=[m.message_id for m in run],
                        transaction_id=run[0].transaction_id)
            return None
        return [_outcome(m, failure) for m, failure in zip(run, failures, strict=True)]

    async def _publish(self, message: Message, *, parent: TraceContext | None = None,
                       span: str = "rms.publish") -> PublishOutcome:
        """One publish, the span ``span`` under ``parent`` (default: the message's stored trace
        context); the record carries that span's context."""
        delivery = message.delivery_count
        with _publish_span(span, parent or message.trace, message, delivery) as publishing:
            try:
                await self._publisher.publish(build_record(message, delivery,
                                                           publishing.context))
            except PublishError as exc:
                publishing.fail(exc.failure.reason or "refused")
                return PublishOutcome(message.message_id, delivery, ok=False,
                                      error=exc.failure.error, reason=exc.failure.reason)
        return PublishOutcome(message.message_id, delivery, ok=True)

    async def deliver_confirmed(self, message: Message, *, actor: str,
                                parent: TraceContext | None = None) -> PublishOutcome | None:
        """The first publish of a message that a confirm (or a one-shot send) just made
        ``sent``: at once, unless the message is delayed or ordered. Those have no delivery
        reserved: the redelivery worker publishes a delayed one when its ``deliver_after`` comes,
        and its sequencer publishes an ordered one in confirm order."""
        if not reserved(message):
            if not sequenced(message):  # an ordered message waits for the sequencer instead
                metrics.SCHEDULED.inc()
            return None
        return await self.deliver(message, actor=actor, reschedule=False, parent=parent)

    async def deliver_confirmed_many(self, batch: Sequence[Message], *, actor: str,
                                     parents: Sequence[TraceContext | None]
                                     ) -> list[PublishOutcome]:
        """:meth:`deliver_confirmed` for the messages one batch confirm made ``sent`` (each
        publish a span under its ``parents`` entry): the reserved ones are handed to the
        producer at once and their outcomes recorded by one write; returns their outcomes
        once they are durably recorded."""
        due: list[Message] = []
        due_parents: list[TraceContext | None] = []
        for message, parent in zip(batch, parents, strict=True):
            if reserved(message):
                due.append(message)
                due_parents.append(parent)
            elif not sequenced(message):
                metrics.SCHEDULED.inc()
        if not due:
            return []
        outcomes = await self.publish_many(due, parents=due_parents)
        await self.record(due, outcomes, actor=actor, reschedule=False)
        return outcomes

    async def publish_many(self, batch: Sequence[Message], *, span: str = "rms.publish",
                           parents: Sequence[TraceContext | None] | None = None
                           ) -> list[PublishOutcome]:
        """Publish every message (concurrently) without recording anything yet: the caller
        must pass the outcomes to :meth:`record` (a worker overlaps that with its next batch).
        Each publish is a span ``span`` under its ``parents`` entry (default: the message's
        stored trace context)."""
        contexts = [m.trace for m in batch] if parents is None else parents
        spans = _spans(span, batch, contexts)
        records = [build_record(message, message.delivery_count, publishing.context)
                   for message, publishing in zip(batch, spans, strict=True)]
        try:
            errors = await self._publisher.publish_many(records)
        except BaseException as exc:
            _end_failed(spans, exc)
            raise
        for publishing, failure in zip(spans, errors, strict=True):
            if failure is not None:
                publishing.fail(failure.reason)
            publishing.end()
        return [_outcome(m, failure) for m, failure in zip(batch, errors, strict=True)]

    async def record(self, batch: Sequence[Message], outcomes: Sequence[PublishOutcome], *,
                     actor: str, reschedule: bool) -> None:
        """Durably record the outcomes of :meth:`publish_many`."""
        await self._writer.submit_many([
            self.recorded(message, outcome, actor=actor, reschedule=reschedule)
            for message, outcome in zip(batch, outcomes, strict=True)])

    def recorded(self, message: Message, outcome: PublishOutcome, *, actor: str,
                 reschedule: bool) -> Recorded:
        """What to write for ``outcome`` (and its metrics and log line)."""
        if not outcome.ok and outcome.reason == HELD_FOR_ORDER:  # no publish was attempted
            log.info("publish.held", message_id=message.message_id, app=message.app,
                     topic=message.topic, attempt=outcome.delivery, error=outcome.error)
            return Recorded(outcome, actor, retry_seconds=self._retry_seconds)
        if not outcome.ok:
            metrics.PUBLISH_FAILURES.labels(reason=outcome.reason or "refused").inc()
            log.warning("publish.failed", message_id=message.message_id, app=message.app,
                        topic=message.topic, attempt=outcome.delivery, reason=outcome.reason,
                        error=outcome.error)
            return Recorded(outcome, actor, retry_seconds=self._retry_seconds)
        metrics.PUBLISHES.inc()
        due = self._ack_deadline(message) if reschedule else None
        return Recorded(outcome, actor, next_due_seconds=due)

    def _ack_deadline(self, message: Message) -> float:
        policy = DeliveryPolicy(ack_timeout_seconds=message.ack_timeout_seconds,
                                delivery_backoff_cap_seconds=self._cap)
        return ack_deadline(policy, max(1, message.deliveries_in_budget))


def _publish_span(name: str, parent: TraceContext | None, message: Message, delivery: int
                  ) -> tracing.Span:
    return tracing.start(name, parent, kind="producer", attributes={
        "messaging.system": "kafka", "messaging.destination.name": message.topic,
        "rms.message_id": message.message_id, "rms.app": message.app, "rms.delivery": delivery})


def _spans(name: str, batch: Sequence[Message], parents: Sequence[TraceContext | None]
           ) -> list[tracing.Span]:
    """A publish span per message (spans recording nothing without tracing)."""
    if not tracing.enabled():
        return [tracing.Span(parent) for parent in parents]
    return [_publish_span(name, parent, m, m.delivery_count)
            for m, parent in zip(batch, parents, strict=True)]


def _end_failed(spans: Sequence[tracing.Span], exc: BaseException) -> None:
    """End every publish span of a call that raised ``exc`` as failed by it."""
    for publishing in spans:
        publishing.fail(f"{type(exc).__name__}: {exc}")
        publishing.end()


def _unknown(message: Message) -> PublishOutcome:
    """A publish whose outcome never came: nothing is recorded, the delivery stays reserved."""
    return PublishOutcome(message.message_id, message.delivery_count, ok=False,
                          error="the Kafka transaction's commit was not answered",
                          reason="unknown")


def _held(message: Message, blocker: str) -> PublishOutcome:
    """Not published: ``blocker``, before it in its transaction, is not published yet."""
    return PublishOutcome(message.message_id, message.delivery_count, ok=False,
                          error=f"not published: message {blocker!r} before it in its "
                                "transaction was not", reason=HELD_FOR_ORDER)


def _outcome(message: Message, failure: PublishFailure | None) -> PublishOutcome:
    if failure is None:
        return PublishOutcome(message.message_id, message.delivery_count, ok=True)
    return PublishOutcome(message.message_id, message.delivery_count, ok=False,
                          error=failure.error, reason=failure.reason)
