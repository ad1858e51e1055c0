"""Redelivery, the redelivery worker's use case (its process: ``rms recovery-worker``,
:mod:`recovery_service`): each tick flags spent messages dead and re-publishes due ones, in
rounds of ``RMS_WORKER_BATCH_SIZE`` until nothing is due, then runs the ordering sequencer
(:mod:`rms.usecases.sequencer`).

How deliveries are counted (see also :mod:`rms.store.dispatch`):

* A delivery number is reserved (``delivery_count + 1``) by the statement that makes a message
  due for publishing: confirm, one-shot send, the redelivery claim, an admin resend.
* Only publishes the broker **accepted** count toward ``max_deliveries``. A refused or timed-out
  publish gives its number back and makes the message due again after
  ``RMS_PUBLISH_RETRY_SECONDS``, so a broker outage never dead-letters anything early: it only
  stops publishing, and everything is delivered once the broker is back.
* A worker killed between the reservation and the broker's answer cannot know whether the
  record went out, so that number stays counted (the message is published again when the
  claim's lease, ``RMS_WORKER_LEASE_SECONDS``, runs out). In the worst case such a crash costs
  one attempt of the budget; it never loses a message.
* After the last allowed delivery the worker still waits for that delivery's ack deadline; only
  then is the message flagged dead (``delivery-exhausted``). A late ack of a dead message still
  marks it ``done`` and clears ``dead``.
* Ack deadlines grow as ``ack_timeout_seconds * 2**(n-1)``, capped at
  ``RMS_DELIVERY_BACKOFF_CAP_SECONDS``, where ``n`` counts deliveries since the budget started
  (an admin resend restarts it).
* While the broker is unreachable the worker does not claim at all (nor flag anything dead),
  and after a round in which every publish failed it sends a single probe per tick until one
  succeeds, so an outage does not fill the event history with ``publish-failed`` rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import structlog

from rms import metrics
from rms.config import WorkerSettings
from rms.dispatcher import Dispatcher
from rms.domain import phase
from rms.domain.models import Message, PublishOutcome
from rms.kafka.publisher import Publisher
from rms.store.admin import AdminStore
from rms.store.redelivery import RedeliveryStore, Round
from rms.usecases.reports import Report
from rms.usecases.sequencer import Sequencer

log = structlog.get_logger(__name__)
# the oldest-unacked gauge is refreshed at most this often (a scrape every 15 s is common)
GAUGE_SECONDS = 5.0
# a delayed message's first publish: it was due at its time, not redelivered
_FIRST_DELAYED = phase.All((phase.FIRST_DELIVERY, phase.DELAYED))


@dataclass
class RedeliveryWorker:
    """The redelivery worker: its stores, its dispatcher (the one publish path) and its
    ordering sequencer are passed in (the process builds them in
    :mod:`recovery_service.runtime`). ``publisher``: whether the broker is reachable."""

    settings: WorkerSettings
    store: RedeliveryStore
    ages: AdminStore
    publisher: Publisher
    dispatcher: Dispatcher
    sequencer: Sequencer
    worker_id: str
    probing: bool = field(default=False, init=False)
    _gauge_refreshed: float = field(default=0.0, init=False)

    async def tick(self) -> Report:
        """Drain what is due (:meth:`drain`); then, if a delivery falls due before the next
        tick (a delayed message's time, an ack deadline), wait for that moment and drain
        again, so a delayed message is published when due rather than up to one interval
        late."""
        report = await self.drain()
        if report.failed or not self.publisher.ready:
            return report
        wait = await self.store.next_due_in(self.settings.worker_interval_seconds)
        if wait is None:
            return report
        await asyncio.sleep(wait)
        report.add(await self.drain())
        return report

    async def drain(self) -> Report:
        """Rounds until one claims less than a full batch (the backlog is drained) or a publish
        fails, then the sequencer's rounds (ordered messages, :mod:`rms.usecases.sequencer`).

        The rounds are pipelined for throughput: while a batch is being published the next one
        is already being claimed (only after a full batch), and a batch's outcomes are written
        (one statement, :meth:`rms.dispatcher.Dispatcher.record`) while the next batch is
        published. Every guard still holds per message, so the overlap changes timing only.
        """
        report = Report()
        await self._refresh_gauge()
        claim = self._claim() if self.publisher.ready else None
        writing: asyncio.Task[None] | None = None
        try:
            while claim is not None:
                limit, found = await claim
                more = len(found.claimed) + len(found.dead) >= limit and not report.failed
                claim = self._claim() if more else None
                outcomes = await self._publish_round(found, report)
                if writing is not None:
                    await writing
                writing = asyncio.create_task(self.dispatcher.record(
                    found.claimed, outcomes, actor=self.worker_id, reschedule=True))
            await _finish(writing)
        finally:
            await _abandon(claim, writing)
        if self.publisher.ready:
            report.ordered = await self.sequencer.tick()
        if report.claimed or report.dead:
            log.info("redelivery.tick", worker=self.worker_id, rounds=report.rounds,
                     claimed=report.claimed, published=report.published, failed=report.failed,
                     dead=report.dead)
        return report

    def _claim(self) -> asyncio.Task[tuple[int, Round]]:
        """Start claiming the next round (one probe after a round whose publishes all failed)."""
        limit = 1 if self.probing else self.settings.worker_batch_size

        async def claim() -> tuple[int, Round]:
            await self._refresh_gauge()
            found = await self.store.claim_round(
                limit=limit, token=self._token(),
                lease_seconds=self.settings.worker_lease_seconds, actor=self.worker_id)
            return limit, found

        return asyncio.create_task(claim())

    async def _publish_round(self, found: Round, report: Report) -> list[PublishOutcome]:
        """Publish a claimed round; returns its outcomes, still to be written."""
        self._report_dead(found)
        outcomes = await self._publish(found.claimed)
        published = sum(1 for outcome in outcomes if outcome.ok)
        failed = len(outcomes) - published
        report.add(Report(rounds=1, claimed=len(found.claimed), published=published,
                          failed=failed, dead=len(found.dead)))
        scheduled = _count_scheduled(found.claimed, outcomes)
        metrics.REDELIVERIES.inc(published - scheduled)
        metrics.REDELIVERY_BATCH.observe(len(found.claimed))
        if found.claimed:
            self.probing = published == 0
        return outcomes

    async def _publish(self, claimed: list[Message]) -> list[PublishOutcome]:
        """Concurrent publishes, at most ``RMS_WORKER_CONCURRENCY`` in flight: the batch is
        handed to the producer in slices of that size."""
        step = max(1, self.settings.worker_concurrency)
        outcomes: list[PublishOutcome] = []
        for start in range(0, len(claimed), step):
            outcomes += await self.dispatcher.publish_many(claimed[start:start + step],
                                                           span="rms.redeliver")
        return outcomes

    def _report_dead(self, found: Round) -> None:
        for message in found.dead:
            reason = message.dead_reason.value if message.dead_reason else "unknown"
            metrics.DEAD_LETTERS.labels(reason).inc()
            log.warning("redelivery.dead", message_id=message.message_id, app=message.app,
                        topic=message.topic, state=message.state.value,
                        attempt=message.deliveries_in_budget, reason=reason)

    async def _refresh_gauge(self) -> None:
        """The oldest unacked age, at most once per interval and at most every
        :data:`GAUGE_SECONDS`: it reads every unacked message, so refreshing it at every
        round would cost the database more than the redeliveries do under a backlog."""
        now = time.monotonic()
        if now - self._gauge_refreshed < max(self.settings.worker_interval_seconds,
                                             GAUGE_SECONDS):
            return
        self._gauge_refreshed = now
        metrics.OLDEST_UNACKED.set(await self.ages.oldest_unacked() or 0.0)

    def _token(self) -> str:
        """Names the worker, so an operator (or a test) sees who holds a claim."""
        return f"{self.worker_id}:{uuid.uuid4().hex[:8]}"


def _count_scheduled(claimed: list[Message], outcomes: list[PublishOutcome]) -> int:
    """Count (and time) the delayed messages among the accepted publishes whose first delivery
    this round made: they were due, not redelivered."""
    now = time.time()
    count = 0
    for message, outcome in zip(claimed, outcomes, strict=True):
        if outcome.ok and phase.holds(_FIRST_DELAYED, message) and message.deliver_after:
            count += 1
            metrics.SCHEDULED_LATENESS.observe(max(0.0, now - message.deliver_after.timestamp()))
    metrics.SCHEDULED_PUBLISHES.inc(count)
    return count


async def _finish(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        await task


async def _abandon(claim: asyncio.Task[Any] | None, writing: asyncio.Task[None] | None) -> None:
    """After a failed round: stop a claim still running (one stopped after it committed leaves
    its messages under their lease, so they come due again) but let the last write finish, so
    the publishes it records are not made again."""
    if claim is not None and not claim.done():
        claim.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await claim
    if writing is not None and not writing.done():
        with contextlib.suppress(Exception):
            await writing
