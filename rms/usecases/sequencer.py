"""Per-key ordering: the sequencer, part of the redelivery worker's tick, publishes ordered
messages per key in confirm order (the rules are in :mod:`rms.domain.ordering`).

Each round leases up to ``RMS_WORKER_BATCH_SIZE`` keys that have a due ordered message (a
row of ``ordering_keys`` per key, taken with ``FOR UPDATE SKIP LOCKED``, so several workers
share the keys through the database and never publish one key at the same time). Keys are
worked on concurrently (at most ``RMS_WORKER_CONCURRENCY`` at once); within a key the messages
go one at a time: the next one is handed to the broker only after the broker accepted the one
before it, so a refused publish can never let a later record of the key overtake it. A key
stops at the first message that holds it back; the due messages behind it are looked at again
after ``RMS_PUBLISH_RETRY_SECONDS`` (so a blocked key does not cost every tick), or at once
after the one holding them back was published.

Every publish goes through the one publish path (:class:`rms.dispatcher.Dispatcher`) and every
claim is the redelivery claim (delivery reserved under a lease, budget spent: dead), re-checked
against the key's lease in the same statement.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from rms import metrics
from rms.config import WorkerSettings
from rms.dispatcher import Dispatcher
from rms.domain import phase
from rms.domain.models import Message, PublishOutcome
from rms.domain.ordering import run_of
from rms.store.ordering import Key, OrderingStore
from rms.usecases.reports import Report

log = structlog.get_logger(__name__)


@dataclass
class Sequencer:
    settings: WorkerSettings
    store: OrderingStore
    dispatcher: Dispatcher
    worker_id: str

    async def tick(self) -> Report:
        """Rounds until one publishes nothing (every due key is done or held back)."""
        report = Report()
        while True:
            token = self._token()
            keys = await self.store.lease_keys(
                limit=self.settings.worker_batch_size, token=token,
                lease_seconds=self.settings.worker_lease_seconds)
            if not keys:
                break
            try:
                done = await self._round(token)
            finally:
                await self.store.release(token)
            report.add(Report(rounds=1, keys=len(done)))
            for key_report in done:
                report.add(key_report)
            if not any(k.published for k in done):
                break
        if report.keys:
            log.info("sequencer.tick", worker=self.worker_id, rounds=report.rounds,
                     keys=report.keys, published=report.published, failed=report.failed,
                     dead=report.dead)
        return report

    async def _round(self, token: str) -> list[Report]:
        """Every leased key: the runs of all keys claimed in one statement, then the keys
        worked on concurrently (at most ``RMS_WORKER_CONCURRENCY`` at once)."""
        queues = await self.store.queues(token, self.settings.worker_batch_size)
        plans = {key: run_of(queue) for key, queue in queues.items()}
        ids = [m.message_id for run, _ in plans.values() for m in run]
        found = await self.store.claim_run(
            ids, key_token=token, token=self._token(),
            lease_seconds=self.settings.worker_lease_seconds, actor=self.worker_id)
        claimed = {m.message_id: m for m in found.claimed}
        reports = {key: Report() for key in plans}
        for message in found.dead:
            self._report_dead(message, reports[Key.of(message)])
        gate = asyncio.Semaphore(max(1, self.settings.worker_concurrency))

        async def one(key: Key, run: list[Message], blocking: Message | None) -> None:
            async with gate:
                await self._pass(key, run, blocking, claimed, reports[key])

        await asyncio.gather(*(one(key, run, blocking)
                               for key, (run, blocking) in plans.items()))
        return list(reports.values())

    async def _pass(self, key: Key, run: list[Message], blocking: Message | None,
                    claimed: dict[str, Message], report: Report) -> None:
        """One key: publish its claimed run one message at a time (each only after the broker
        accepted the one before), record the outcomes in one statement; the rest of the key
        waits behind the first message not accepted."""
        if run:
            ready = _claimed_prefix(run, claimed)
            outcomes = await self._publish_in_order(ready)
            published = ready[:len(outcomes)]
            await self.store.give_back([claimed[m.message_id] for m in run[len(published):]
                                        if m.message_id in claimed])
            await self.dispatcher.record(published, outcomes, actor=self.worker_id,
                                         reschedule=True)
            self._count(published, outcomes, report)
            accepted = sum(1 for outcome in outcomes if outcome.ok)
            if accepted < len(run):  # the first one not accepted holds back the rest
                blocking = run[accepted]
            elif run[-1].publish_failure is not None and run[-1].confirm_seq is not None:
                # a refused message tried alone was accepted: what waited behind it is due now
                await self.store.clear_behind(key, run[-1].confirm_seq)
        if blocking is not None:
            report.held = True
            if blocking.confirm_seq is not None:
                await self.store.hold_behind(key, blocking.confirm_seq,
                                             self.settings.publish_retry_seconds)

    async def _publish_in_order(self, claimed: Sequence[Message]) -> list[PublishOutcome]:
        """Publish one after the other; stop after the first one the broker did not accept."""
        outcomes: list[PublishOutcome] = []
        for message in claimed:
            [outcome] = await self.dispatcher.publish_many([message])
            outcomes.append(outcome)
            if not outcome.ok:
                break
        return outcomes

    def _count(self, published: Sequence[Message], outcomes: Sequence[PublishOutcome],
               report: Report) -> None:
        for message, outcome in zip(published, outcomes, strict=True):
            if not outcome.ok:
                report.failed += 1
                continue
            report.published += 1
            if not phase.holds(phase.FIRST_DELIVERY, message):
                metrics.REDELIVERIES.inc()

    def _report_dead(self, message: Message, report: Report) -> None:
        report.dead += 1
        metrics.DEAD_LETTERS.labels("delivery-exhausted").inc()
        log.warning("redelivery.dead", message_id=message.message_id, app=message.app,
                    topic=message.topic, attempt=message.deliveries_in_budget,
                    reason="delivery-exhausted", ordered=True)

    def _token(self) -> str:
        return f"{self.worker_id}:{uuid.uuid4().hex[:8]}"


def _claimed_prefix(run: Sequence[Message], by_id: dict[str, Message]) -> list[Message]:
    """The claimed messages of ``run`` up to the first one the claim did not take (dead now,
    acknowledged meanwhile, or the key lease ran out), as claimed, in run order."""
    prefix: list[Message] = []
    for message in run:
        if message.message_id not in by_id:
            break
        prefix.append(by_id[message.message_id])
    return prefix
