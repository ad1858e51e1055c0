"""The transactional producers of one process: the records of a transaction's atomic publish
(design section 4, "Transactions") are written in one Kafka transaction, so a
``read_committed`` consumer sees all of them or none.

A Kafka producer runs one transaction at a time, so the process holds a few producers (a
pool of slots, each with its own stable ``transactional_id``). The publishes that wait while
every slot is busy go together in the next free slot's Kafka transaction (a group commit, up to
``_BATCH_RECORDS`` records): each one's records are still all visible or none, and a commit
costs the broker's round trips once for all of them. When the broker refuses a record of one
publish, the others of that Kafka transaction, none of whose records failed, are written again
at once in one more transaction.
A producer is started before its first transaction; its start fences every older producer
of its id (a zombie of this process's predecessor) and aborts the transaction that one left
open. A producer whose transaction failed in a way it cannot continue from (fenced, its
sender stopped, an abort that failed, a commit whose answer never came) is replaced by a new
one with the same id, which also settles the old one's transaction at the coordinator.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError

from rms import metrics
from rms.config import WorkerSettings
from rms.kafka.failures import MissingTopics, PublishFailure, classify
from rms.kafka.publisher import producer_options
from rms.kafka.records import OutgoingRecord
from rms.kafka.transactional_ids import transactional_ids

log = structlog.get_logger(__name__)

_PROBE_SECONDS = 1.0
FAULT_EXIT_CODE = 75  # the test fault's exit status

Outcome = Literal["committed", "aborted", "unknown"]


@dataclass(frozen=True)
class AtomicResult:
    """``committed``: the broker committed every record. ``aborted``: none is visible;
    ``failures`` says, per record, why (``transaction-aborted`` for the records that were not
    themselves refused). ``unknown``: the commit's answer never came; it may have committed."""

    outcome: Outcome
    failures: tuple[PublishFailure | None, ...] = ()


class AtomicPublisher(Protocol):
    async def publish_atomically(self, records: Sequence[OutgoingRecord]) -> AtomicResult: ...


# between two attempts to start a replaced producer while the broker does not answer
_RESTART_PAUSE_SECONDS = 1.0


@dataclass
class _Slot:
    transactional_id: str
    producer: AIOKafkaProducer | None = None
    starting: asyncio.Lock = field(default_factory=asyncio.Lock)


# the most records one Kafka transaction takes from the publishes waiting for a slot (a single
# publish larger than this still goes whole, alone)
_BATCH_RECORDS = 500


@dataclass
class _Pending:
    """A publish waiting for its Kafka transaction, and where its result goes."""

    records: Sequence[OutgoingRecord]
    answer: asyncio.Future[AtomicResult]

    def settle(self, result: AtomicResult) -> None:
        if not self.answer.done():
            self.answer.set_result(result)


class TransactionalPublisher:
    """Atomic publishes over a pool of transactional producers."""

    def __init__(self, settings: WorkerSettings, transactional_ids: Sequence[str]) -> None:
        options = producer_options(settings)
        options.pop("enable_idempotence")  # a transactional producer is idempotent
        options["acks"] = "all"
        options["transaction_timeout_ms"] = int(settings.kafka_transaction_timeout_seconds * 1000)
        self._options = options
        self._timeout = settings.kafka_publish_timeout_seconds
        self._missing = MissingTopics(settings.publish_retry_seconds)
        self._slots = [_Slot(tid) for tid in transactional_ids]
        self._free: list[_Slot] = list(reversed(self._slots))
        self._waiting: collections.deque[_Pending] = collections.deque()
        self._running: set[asyncio.Task[None]] = set()
        self._starting: set[asyncio.Task[None]] = set()
        self._exit_after = settings.fault_exit_after_transaction_records

    @property
    def transactional_ids(self) -> list[str]:
        return [slot.transactional_id for slot in self._slots]

    async def start(self, wait_seconds: float = 0.0) -> None:
        """Start every producer in the background (fencing this id's zombies at once); wait up
        to ``wait_seconds`` for them. A broker that is down does not stop the process: a slot
        not started is started by its first publish."""
        for slot in self._slots:
            task = asyncio.create_task(self._start_quietly(slot), name="kafka-txn-start")
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)
        if self._starting:
            await asyncio.wait(set(self._starting), timeout=wait_seconds)

    async def stop(self) -> None:
        """Stop every producer. A publish still waiting for a slot is answered ``aborted``
        (nothing of it was written); one inside a transaction gets that transaction's end."""
        while self._waiting:
            pending = self._waiting.popleft()
            stopped = PublishFailure("broker-unavailable", "the process is stopping")
            pending.settle(_aborted(pending.records, [stopped] * len(pending.records)))
        await asyncio.gather(*self._running, return_exceptions=True)
        for task in set(self._starting):
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        for slot in self._slots:
            await _stop_quietly(slot.producer)
            slot.producer = None

    async def publish_atomically(self, records: Sequence[OutgoingRecord]) -> AtomicResult:
        """Write ``records`` in one Kafka transaction, in their order, and commit it."""
        known = [self._missing.failure(record.topic) for record in records]
        if any(known):
            return _aborted(records, known)
        pending = _Pending(records, asyncio.get_running_loop().create_future())
        self._waiting.append(pending)
        self._dispatch()
        # shielded: a caller that gives up does not take the others' transaction with it
        return await asyncio.shield(pending.answer)

    def _dispatch(self) -> None:
        """Give each free slot the publishes waiting, as one Kafka transaction."""
        while self._waiting and self._free:
            batch = self._take()
            if not batch:
                return
            task = asyncio.create_task(self._run(self._free.pop(), batch), name="kafka-txn")
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def _take(self) -> list[_Pending]:
        """The waiting publishes, oldest first, up to ``_BATCH_RECORDS`` records (at least
        one publish); those whose caller is gone are dropped."""
        batch: list[_Pending] = []
        size = 0
        while self._waiting:
            pending = self._waiting[0]
            if pending.answer.done():
                self._waiting.popleft()
                continue
            if batch and size + len(pending.records) > _BATCH_RECORDS:
                break
            batch.append(self._waiting.popleft())
            size += len(pending.records)
        return batch

    async def _run(self, slot: _Slot, batch: list[_Pending]) -> None:
        """One Kafka transaction for ``batch``; after an abort caused by some publishes'
        own records, the others go again in one more transaction."""
        try:
            again = self._settle(batch, await self._timed(slot, batch))
            if again:
                self._settle(again, await self._timed(slot, again), final=True)
        except BaseException as exc:
            for pending in batch:
                if not pending.answer.done():
                    pending.answer.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._free.append(slot)
            self._dispatch()

    async def _timed(self, slot: _Slot, batch: Sequence[_Pending]) -> AtomicResult:
        started = time.perf_counter()
        records = [r for pending in batch for r in pending.records]
        metrics.KAFKA_TRANSACTION_RECORDS.observe(len(records))
        try:
            return await self._in_slot(slot, records)
        finally:
            metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)

    @staticmethod
    def _settle(batch: Sequence[_Pending], result: AtomicResult,
                final: bool = False) -> list[_Pending]:
        """Answer each publish of ``batch`` its part of ``result``; returns those to write
        again (unless ``final``): after an abort that some publishes' own records caused, the
        others, none of whose records failed."""
        if result.outcome != "aborted":
            for pending in batch:
                pending.settle(AtomicResult(result.outcome, (None,) * len(pending.records)
                                            if result.outcome == "committed" else ()))
            return []
        parts: list[tuple[_Pending, list[PublishFailure | None]]] = []
        offset = 0
        for pending in batch:
            parts.append((pending, list(result.failures[offset:offset + len(pending.records)])))
            offset += len(pending.records)
        owns = [[f if f is not None and f.reason != "transaction-aborted" else None
                 for f in part] for _, part in parts]
        blamed = [any(own) for own in owns]
        again: list[_Pending] = []
        for (pending, part), own, to_blame in zip(parts, owns, blamed, strict=True):
            if to_blame:
                pending.settle(_aborted(pending.records, own))
            elif final or all(blamed) or not any(blamed):
                pending.settle(AtomicResult("aborted", tuple(part)))
            else:
                again.append(pending)
        return again

    async def _in_slot(self, slot: _Slot, records: Sequence[OutgoingRecord]) -> AtomicResult:
        try:
            async with asyncio.timeout(self._timeout):
                producer = await self._started(slot)
            missing = await self._missing_topics(producer, records)
            if any(missing):
                return _aborted(records, missing)
            async with asyncio.timeout(self._timeout):
                await producer.begin_transaction()
        except (KafkaError, TimeoutError, OSError, AssertionError) as exc:
            await self._replace(slot, f"could not begin a transaction: {exc!r}")
            return _aborted(records, [classify(exc)] * len(records))
        failures = await self._send_all(producer, records)
        if any(failures):
            await self._abort(slot, producer)
            return _aborted(records, failures)
        try:
            async with asyncio.timeout(self._timeout):
                await producer.commit_transaction()
        except (KafkaError, TimeoutError, OSError, AssertionError) as exc:
            # aiokafka asserts its transaction state: a producer turned fatal (fenced, or an
            # error it cannot recover from) during the sends refuses the commit that way
            log.warning("kafka.transaction_unknown", transactional_id=slot.transactional_id,
                        error=f"{type(exc).__name__}: {exc}")
            await self._replace(slot, "the commit's outcome is unknown")
            return AtomicResult("unknown")
        return AtomicResult("committed", (None,) * len(records))

    async def _send_all(self, producer: AIOKafkaProducer, records: Sequence[OutgoingRecord]
                        ) -> list[PublishFailure | None]:
        """Hand every record to the producer in order and wait for the broker's answers. A
        record the producer refuses to take (too large) is that record's failure alone, and no
        record after it is sent."""
        failures: list[PublishFailure | None] = [None] * len(records)
        futures: list[asyncio.Future[Any]] = []
        try:
            async with asyncio.timeout(self._timeout):
                for index, record in enumerate(records):
                    try:
                        futures.append(await producer.send(
                            record.topic, record.value, key=record.key, headers=record.headers))
                    except (MessageSizeTooLargeError, RecordListTooLargeError) as exc:
                        failures[index] = classify(exc)
                        break
                if 0 < self._exit_after <= len(futures):
                    await die_after(futures[self._exit_after - 1])
                await asyncio.gather(*futures, return_exceptions=True)
        except (KafkaError, TimeoutError, OSError) as exc:
            failure = classify(exc)
            for index in range(len(records)):
                failures[index] = failure
        for index, future in enumerate(futures):
            if future.done() and not future.cancelled() and future.exception() is not None:
                failures[index] = self._failure(records[index].topic, future.exception())
        return failures

    async def _missing_topics(self, producer: AIOKafkaProducer,
                              records: Sequence[OutgoingRecord]) -> list[PublishFailure | None]:
        """Which records go to a topic the cluster lacks, asked before the transaction begins
        (a send to a missing topic would wait for its metadata until the time-out)."""
        unknown = {r.topic for r in records
                   if producer.client.cluster.partitions_for_topic(r.topic) is None}
        answers = await asyncio.gather(*(self._topic_failure(producer, topic)
                                         for topic in unknown))
        by_topic = dict(zip(unknown, answers, strict=True))
        return [by_topic.get(record.topic) for record in records]

    async def _topic_failure(self, producer: AIOKafkaProducer, topic: str
                             ) -> PublishFailure | None:
        try:
            async with asyncio.timeout(self._timeout):  # a cluster may create it now
                await producer.client._wait_on_metadata(topic)
        except (KafkaError, TimeoutError, OSError) as exc:
            try:
                async with asyncio.timeout(_PROBE_SECONDS):
                    cluster = await producer.client.fetch_all_metadata()
            except (KafkaError, TimeoutError, OSError):
                return PublishFailure("broker-unavailable", f"{type(exc).__name__}: {exc}")
            if topic in cluster.topics():
                return classify(exc)
            self._missing.add(topic)
            return self._missing.failure(topic)
        return None

    def _failure(self, topic: str, exc: BaseException | None) -> PublishFailure:
        failure = classify(exc or KafkaError("no answer"))
        if failure.reason == "topic-missing":
            self._missing.add(topic)
        return failure

    async def _abort(self, slot: _Slot, producer: AIOKafkaProducer) -> None:
        """Abort the open transaction; a producer that cannot abort is replaced (its
        replacement's start aborts the transaction at the coordinator). A producer in a fatal
        state cannot abort (aiokafka refuses the transition): it is replaced at once."""
        if _fatal(producer):
            await self._replace(slot, "the producer's transaction state is fatal")
            return
        try:
            async with asyncio.timeout(self._timeout):
                await producer.abort_transaction()
        except (KafkaError, TimeoutError, OSError, AssertionError) as exc:
            await self._replace(slot, f"could not abort: {exc!r}")

    async def _started(self, slot: _Slot) -> AIOKafkaProducer:
        async with slot.starting:
            producer = slot.producer
            if producer is not None and not _sender_stopped(producer) and not _fatal(producer):
                return producer
            if producer is not None:
                await self._replace(slot, "the producer's sender stopped or its transaction "
                                          "state is fatal")
            producer = AIOKafkaProducer(**self._options, transactional_id=slot.transactional_id)
            try:
                await producer.start()
                # the producer id: registering it fences every older producer of the id
                await producer._txn_manager.wait_for_pid()
            except BaseException:
                await _stop_quietly(producer)
                raise
            slot.producer = producer
            log.info("kafka.transactional_producer_started",
                     transactional_id=slot.transactional_id)
            return producer

    async def _start_quietly(self, slot: _Slot) -> None:
        with contextlib.suppress(KafkaError, TimeoutError, OSError):
            async with asyncio.timeout(max(self._timeout, 10.0)):
                await self._started(slot)

    async def _replace(self, slot: _Slot, why: str) -> None:
        """Drop the slot's producer and start a new one in the background at once: its start
        aborts, at the coordinator, a transaction the old one left open, which would hold back
        every read_committed consumer of its partitions until the transaction time-out."""
        old, slot.producer = slot.producer, None
        if old is None:
            return
        log.warning("kafka.producer_reset", transactional_id=slot.transactional_id, reason=why)
        metrics.PRODUCER_RESETS.inc()
        await _stop_quietly(old)
        task = asyncio.create_task(self._restart(slot), name="kafka-txn-restart")
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _restart(self, slot: _Slot) -> None:
        """Start the slot's producer again until it starts (a broker away is waited for)."""
        while slot.producer is None:
            await self._start_quietly(slot)
            if slot.producer is None:
                await asyncio.sleep(_RESTART_PAUSE_SECONDS)


async def die_after(accepted: asyncio.Future[Any] | None = None) -> None:
    """The test suite's fault: end the process the moment the broker accepted ``accepted``,
    as a crash would (no clean-up, nothing more recorded or committed)."""
    if accepted is not None:
        await asyncio.gather(accepted, return_exceptions=True)
    log.warning("fault.exit_mid_transaction")
    os._exit(FAULT_EXIT_CODE)


def _sender_stopped(producer: AIOKafkaProducer) -> bool:
    sender = producer._sender.sender_task
    return sender is not None and sender.done()


def _fatal(producer: AIOKafkaProducer) -> bool:
    """The producer's transactions ended for good (fenced, or an unrecoverable error)."""
    return bool(producer._txn_manager is not None and producer._txn_manager.is_fatal_error())


def _aborted(records: Sequence[OutgoingRecord], failures: Sequence[PublishFailure | None]
             ) -> AtomicResult:
    """Every record's reason: its own failure, else that another member's failed."""
    first = next((index for index, f in enumerate(failures) if f is not None), 0)
    cause = failures[first]
    aborted = PublishFailure("transaction-aborted",
                             f"the Kafka transaction was aborted: record {first + 1} of "
                             f"{len(records)} failed ({cause.error if cause else 'unknown'})")
    return AtomicResult("aborted", tuple(f if f is not None else aborted for f in failures))


async def _stop_quietly(producer: AIOKafkaProducer | None) -> None:
    if producer is None:
        return
    with contextlib.suppress(Exception):
        async with asyncio.timeout(5.0):
            await producer.stop()


@contextlib.asynccontextmanager
async def atomic_publisher(settings: WorkerSettings, role: str
                           ) -> AsyncIterator[TransactionalPublisher | None]:
    """The transactional producers of a process of ``role`` (``api``, ``confirm-worker``),
    started for as long as the context lasts; None when ``RMS_KAFKA_TRANSACTIONS`` is off."""
    if not settings.kafka_transactions:
        yield None
        return
    ids = transactional_ids(settings.kafka_transactional_id_prefix, settings.instance_name,
                            settings.instance_slot_dir, role,
                            settings.kafka_transactional_producers)
    publisher = TransactionalPublisher(settings, ids.ids)
    try:
        await publisher.start(wait_seconds=5.0)
        yield publisher
    finally:
        await publisher.stop()
        ids.release()
