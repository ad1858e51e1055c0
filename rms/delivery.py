"""The one publish path: producer confirm, check-back confirm, one-shot send, recovery
re-delivery and admin resend all hand a message whose delivery number is reserved to
:meth:`Dispatcher.deliver` (or, a worker's batch, :meth:`Dispatcher.publish_many` then
:meth:`Dispatcher.record`).

The broker's answers are written by a :class:`~rms.batching.Coalescer`: concurrent deliveries
(concurrent API confirms, a worker's batch) share one statement per flush, and each call still
returns only after its own outcome is durably recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from rms import metrics
from rms.batching import Coalescer
from rms.config import WorkerSettings
from rms.domain.models import Message, PublishOutcome
from rms.domain.policy import DeliveryPolicy, ack_deadline
from rms.kafka.failures import PublishFailure
from rms.kafka.publisher import Publisher, PublishError
from rms.kafka.records import build_record
from rms.store.deliveries import DeliveryStore, Recorded

log = structlog.get_logger(__name__)
# the failure reason of a transaction's message held back behind an earlier unpublished one
HELD_FOR_ORDER = "held-for-order"


def dispatcher_for(publisher: Publisher, engine: AsyncEngine, settings: WorkerSettings
                   ) -> Dispatcher:
    """The dispatcher of one process: its publisher, its engine, the deployment's policy."""
    return Dispatcher(publisher, DeliveryStore(engine), settings.publish_retry_seconds,
                      settings.delivery_backoff_cap_seconds)


class Dispatcher:
    def __init__(self, publisher: Publisher, store: DeliveryStore, retry_seconds: float,
                 backoff_cap_seconds: float) -> None:
        self._publisher = publisher
        self._store = store
        self._retry_seconds = retry_seconds
        self._cap = backoff_cap_seconds
        # several flushes at once, as on the request path: each waits for its commit (an fsync),
        # and a confirm's answer waits for its `published` event
        self._writer: Coalescer[Recorded, bool] = Coalescer(store.record_many, name="deliveries",
                                                            max_inflight=4)

    async def deliver(self, message: Message, *, actor: str, reschedule: bool) -> PublishOutcome:
        """Publish delivery number ``message.delivery_count`` and record the broker's answer;
        returns once that answer is durably recorded.

        ``reschedule``: set the ack deadline after an accepted publish (recovery, resend); the
        confirm path set it already in the confirming statement.
        """
        outcome = await self._publish(message)
        recorded = self.recorded(message, outcome, actor=actor, reschedule=reschedule)
        await self._writer.submit(recorded)
        return outcome

    async def deliver_in_order(self, batch: Sequence[Message], *, actor: str
                               ) -> list[PublishOutcome]:
        """Publish the confirmed messages of a transaction one after another, in their order,
        each once the broker accepted the one before, then record every outcome in one write
        (each message stays claimed until its accepted publish is recorded, which sets its
        ack deadline). When one fails, the later ones are not published now: they are
        recorded as held back (reason ``held-for-order``; their reserved numbers given back
        like a failed publish's), and the recovery worker publishes the rest in order
        (:mod:`rms.store.redeliveries`)."""
        outcomes: list[PublishOutcome] = []
        for message in batch:
            outcome = await self._publish(message)
            outcomes.append(outcome)
            if not outcome.ok:
                break
        failed = outcomes[-1] if outcomes and not outcomes[-1].ok else None
        outcomes += [PublishOutcome(m.message_id, m.delivery_count, ok=False,
                                    error=f"not published: message {failed.message_id!r} "
                                          "before it in its transaction was not",
                                    reason=HELD_FOR_ORDER)
                     for m in batch[len(outcomes):] if failed is not None]
        await self.record(batch, outcomes, actor=actor, reschedule=True)
        return outcomes

    async def _publish(self, message: Message) -> PublishOutcome:
        delivery = message.delivery_count
        try:
            await self._publisher.publish(build_record(message, delivery))
        except PublishError as exc:
            return PublishOutcome(message.message_id, delivery, ok=False,
                                  error=exc.failure.error, reason=exc.failure.reason)
        return PublishOutcome(message.message_id, delivery, ok=True)

    async def publish_many(self, batch: Sequence[Message]) -> list[PublishOutcome]:
        """Publish every message (concurrently) without recording anything yet: the caller
        must pass the outcomes to :meth:`record` (a worker overlaps that with its next batch)."""
        records = [build_record(message, message.delivery_count) for message in batch]
        errors = await self._publisher.publish_many(records)
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


def _outcome(message: Message, failure: PublishFailure | None) -> PublishOutcome:
    if failure is None:
        return PublishOutcome(message.message_id, message.delivery_count, ok=True)
    return PublishOutcome(message.message_id, message.delivery_count, ok=False,
                          error=failure.error, reason=failure.reason)
