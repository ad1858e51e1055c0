"""Consumes the ack topic (design section 6) and hands each batch of records to the ack use
case (:class:`rms.usecases.acks.Acks`), which judges each record alone and counts what it
rejects, so no record can stop the ones after it. Offsets are committed after the batch is
applied (at-least-once; acks are idempotent).

Only an outage sends the consumer back to the same batch, for as long as it lasts: Kafka, or a
PostgreSQL that cannot answer a trivial query or fails for want of connections, disk or memory
(skipping records then would lose acks). A batch that keeps failing while PostgreSQL answers
fails for a reason outside any outage: after ``RMS_ACK_BATCH_MAX_TRIES`` tries it is applied
record by record, a record that still fails is set aside (``unapplicable``), and the consumer
commits past it, so nothing the topic holds can stop it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

import asyncpg
import structlog
from aiokafka import AIOKafkaClient, AIOKafkaConsumer
from aiokafka.errors import KafkaError

from rms import metrics
from rms.config import Settings
from rms.kafka.security import client_options
from rms.outage import OutageLog, cause_of
from rms_client.ack_records import AckRecord

log = structlog.get_logger(__name__)
TOPIC_CHECK_SECONDS = 5.0
RETRY_PAUSE_SECONDS = 0.2  # between the tries of a failing batch (doubling, at most 2 s)
Apply = Callable[[Sequence[AckRecord]], Awaitable[int]]
Reachable = Callable[[], Awaitable[bool]]
# PostgreSQL failing for want of a resource or by an operator's hand (SQLSTATE classes 08, 53,
# 57, 58): an outage whatever the records hold
_SERVER_TROUBLE = (asyncpg.PostgresConnectionError, asyncpg.InterfaceError,
                   asyncpg.exceptions.InsufficientResourcesError,
                   asyncpg.exceptions.OperatorInterventionError,
                   asyncpg.exceptions.PostgresSystemError, KafkaError, OSError, TimeoutError)


class AckConsumer:
    def __init__(self, settings: Settings, apply: Apply, database_reachable: Reachable) -> None:
        self._settings = settings
        self._batches = BatchApplier(apply, database_reachable, settings.ack_batch_max_tries)
        self._task: asyncio.Task[None] | None = None
        self._outage = OutageLog("ack-consumer")
        self._topic_missing = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ack-consumer")

    async def stop(self, grace_seconds: float = 1.0) -> None:
        """Cancel the loop and give it ``grace_seconds`` to leave the group. A consumer
        stopped while its group join is in flight waits for the join to finish (seconds on
        some brokers); shutdown does not wait for that: the broker expires the member."""
        if self._task is None:
            return
        self._task.cancel()
        done, _ = await asyncio.wait({self._task}, timeout=grace_seconds)
        if done:
            with contextlib.suppress(asyncio.CancelledError):
                self._task.result()

    async def _run(self) -> None:
        while True:
            if not await self._ack_topic_exists():  # a consumer would wait for it silently
                await asyncio.sleep(TOPIC_CHECK_SECONDS)
                continue
            consumer = AIOKafkaConsumer(
                self._settings.ack_topic,
                **client_options(self._settings),
                group_id=self._settings.ack_consumer_group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                client_id=f"{self._settings.kafka_client_id}-acks",
                # the longest a fetch waits for new records: aiokafka's 500 ms default would
                # delay an ack that arrives while a fetch is parked by up to that much
                fetch_max_wait_ms=self._settings.ack_consumer_max_wait_ms,
            )
            try:
                await consumer.start()
                await self._consume(consumer)
            except Exception as exc:
                self._outage.failed(exc)  # keep the API alive whatever a batch does
            finally:
                with contextlib.suppress(KafkaError, OSError):
                    await consumer.stop()
            await asyncio.sleep(1.0)

    async def _consume(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            batches = await consumer.getmany(timeout_ms=500, max_records=1000)
            records = [record for batch in batches.values() for record in batch]
            if records:
                await self._batches.apply([AckRecord.of(r.value, r.headers) for r in records])
                await consumer.commit()
            self._outage.succeeded()

    async def _ack_topic_exists(self) -> bool:
        """Whether the cluster has the ack topic; a cluster that does not create topics on
        first use needs ``rms topics create``. Unknown (cluster unreachable) counts as yes:
        the consumer's own failure then tells of the outage."""
        topic = self._settings.ack_topic
        client = AIOKafkaClient(**client_options(self._settings),
                                client_id=f"{self._settings.kafka_client_id}-acks-check")
        exists = False
        try:
            await client.bootstrap()
            client.add_topic(topic)  # asks for it by name: a broker that creates topics does
            for _ in range(5):
                await client.force_metadata_update()
                exists = topic in client.cluster.topics()
                if exists:
                    break
                await asyncio.sleep(0.2)
        except (KafkaError, OSError):
            return True
        finally:
            await client.close()
        self._report_topic(exists)
        return exists

    def _report_topic(self, exists: bool) -> None:
        missing = not exists
        if missing and not self._topic_missing:
            log.warning("ack_consumer.topic_missing", topic=self._settings.ack_topic,
                        hint="create it: rms topics create")
        elif exists and self._topic_missing:
            log.info("ack_consumer.topic_found", topic=self._settings.ack_topic)
        self._topic_missing = missing
        metrics.ACK_TOPIC_MISSING.set(1 if missing else 0)


class BatchApplier:
    """Applies one batch, telling an outage (raised: the same batch comes again, nothing is
    skipped) from a batch that keeps failing while PostgreSQL answers (tried ``max_tries``
    times, then record by record; what still fails is set aside and counted)."""

    def __init__(self, apply: Apply, database_reachable: Reachable, max_tries: int) -> None:
        self._apply = apply
        self._reachable = database_reachable
        self._max_tries = max_tries
        self._failures = OutageLog("ack-batch")

    async def apply(self, records: Sequence[AckRecord]) -> None:
        for attempt in range(self._max_tries):
            if await self._applied(records):
                self._failures.succeeded()
                return
            if attempt + 1 < self._max_tries:
                await asyncio.sleep(min(RETRY_PAUSE_SECONDS * 2 ** attempt, 2.0))
        metrics.ACK_BATCHES_SET_ASIDE.inc()
        log.error("ack_consumer.batch_set_aside", records=len(records), tries=self._max_tries,
                  hint="applied record by record; records that still fail are set aside")
        unapplicable = [record for record in records if not await self._applied([record])]
        metrics.ACKS_REJECTED.labels("unapplicable").inc(len(unapplicable))
        self._failures.succeeded()

    async def _applied(self, records: Sequence[AckRecord]) -> bool:
        """Whether ``records`` were applied; raises what is an outage."""
        try:
            await self._apply(records)
        except Exception as exc:
            if await self._outage(exc):
                raise
            self._failures.failed(exc)
            return False
        return True

    async def _outage(self, exc: Exception) -> bool:
        return (any(isinstance(link, _SERVER_TROUBLE) for link in _chain(exc))
                or cause_of(exc) == "kafka" or not await self._reachable())


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (a driver's error under SQLAlchemy's)."""
    links: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in links and len(links) < 10:
        links.append(current)
        current = current.__cause__ or current.__context__
    return links
