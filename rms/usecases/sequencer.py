"""The sequencer, part of the recovery worker's tick: publishes ordered messages per key in
confirm order (the rules are in :mod:`rms.domain.ordering`).

Each round leases up to ``RMS_WORKER_BATCH_SIZE`` keys that have a due ordered message (a
row of ``ordering_keys`` per key, taken with ``FOR UPDATE SKIP LOCKED``, so several workers
share the keys through the database and never publish one key at the same time). Keys are
worked on concurrently (at most ``RMS_WORKER_CONCURRENCY`` at once); within a key the messages
go one at a time: the next one is handed to the broker only after the broker accepted the one
before it, so a refused publish can never let a later record of the key overtake it. A key
stops at the first message that holds it back; the due messages behind it are looked at again
after ``RMS_PUBLISH_RETRY_SECONDS`` (so a blocked key does not cost every tick), or at once
after the one holding them back was published.

Every publish goes through the one publish path (:class:`rms.delivery.Dispatcher`) and every
claim is the recovery claim (delivery reserved under a lease, budget spent: dead), re-checked
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
from rms.delivery import Dispatcher
from rms.domain.models import Message
from rms.domain.ordering import Step, step
from rms.store.sequencing import Key, Queued, SequencingStore

log = structlog.get_logger(__name__)


@dataclass
class KeyReport:
    """What one pass over a key did."""

    published: int = 0
    failed: int = 0
    dead: int = 0
    held: bool = False


@dataclass
class SequenceReport:
    rounds: int = 0
    keys: int = 0
    published: int = 0
    failed: int = 0
    dead: int = 0

    def add(self, keys: Sequence[KeyReport]) -> None:
        self.rounds += 1
        self.keys += len(keys)
        self.published += sum(k.published for k in keys)
        self.failed += sum(k.failed for k in keys)
        self.dead += sum(k.dead for k in keys)


@dataclass
class Sequencer:
    settings: WorkerSettings
    store: SequencingStore
    dispatcher: Dispatcher
    worker_id: str

    async def tick(self) -> SequenceReport:
        """Rounds until one publishes nothing (every due key is done or held back)."""
        report = SequenceReport()
        while True:
            token = self._token()
            keys = await self.store.lease_keys(
                limit=self.settings.worker_batch_size, token=token,
                lease_seconds=self.settings.worker_lease_seconds)
            if not keys:
                break
            gate = asyncio.Semaphore(max(1, self.settings.worker_concurrency))
            done = await asyncio.gather(*(self._key(key, token, gate) for key in keys))
            report.add(done)
            if not any(k.published for k in done):
                break
        if report.keys:
            log.info("sequencer.tick", worker=self.worker_id, rounds=report.rounds,
                     keys=report.keys, published=report.published, failed=report.failed,
                     dead=report.dead)
        return report

    async def _key(self, key: Key, token: str, gate: asyncio.Semaphore) -> KeyReport:
        async with gate:
            try:
                return await self._pass(key, token)
            finally:
                await self.store.release(key, token)

    async def _pass(self, key: Key, token: str) -> KeyReport:
        """One pass over the key's queue in confirm order."""
        report = KeyReport()
        cleared = False
        for queued in await self.store.queue(key, self.settings.worker_batch_size):
            what = step(queued.message, queued.due, cleared)
            if what is Step.GO_ON:
                continue
            if what is Step.HOLD or not await self._publish(queued.message, token, report):
                await self._hold(key, queued, report)
                return report
            cleared = True
        return report

    async def _publish(self, message: Message, token: str, report: KeyReport) -> bool:
        """Claim and publish one message; whether the broker accepted it."""
        found = await self.store.claim(
            message.message_id, key_token=token, token=self._token(),
            lease_seconds=self.settings.worker_lease_seconds, actor=self.worker_id)
        for dead in found.dead:
            report.dead += 1
            metrics.DEAD_LETTERS.labels("delivery-exhausted").inc()
            log.warning("recovery.dead", message_id=dead.message_id, app=dead.app,
                        topic=dead.topic, attempt=dead.deliveries_in_budget,
                        reason="delivery-exhausted", ordered=True)
        if not found.claimed:  # dead now, acked meanwhile, or the key lease ran out
            return False
        outcome = await self.dispatcher.deliver(found.claimed[0], actor=self.worker_id,
                                                reschedule=True)
        if outcome.ok:
            report.published += 1
            if message.delivery_count > 0:  # published before: this is a redelivery
                metrics.REDELIVERIES.inc()
        else:
            report.failed += 1
        return outcome.ok

    async def _hold(self, key: Key, blocking: Queued, report: KeyReport) -> None:
        report.held = True
        seq = blocking.message.confirm_seq
        if seq is not None:
            await self.store.hold_behind(key, seq, self.settings.publish_retry_seconds)

    def _token(self) -> str:
        return f"{self.worker_id}:{uuid.uuid4().hex[:8]}"
