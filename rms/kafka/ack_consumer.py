"""Consumes the ack topic (design section 6: value ``{"message_id", "consumer"}``) and marks the
acknowledged messages ``done`` in batches. An ack counts only when ``consumer`` names an app
whose ``consume_topics`` cover the message's topic; anything else is counted and skipped.
Offsets are committed after the database commit (at-least-once; acks are idempotent)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterable

import structlog
from aiokafka import AIOKafkaClient, AIOKafkaConsumer
from aiokafka.errors import KafkaError

from rms import metrics
from rms.config import Settings
from rms.domain.errors import NotFound
from rms.domain.topics import topic_allowed
from rms.kafka.ack_records import AckRecord, Rejection, parse_ack, signature_problem
from rms.outage import OutageLog
from rms.store.apps import AppStore
from rms.store.messages import MessageStore

log = structlog.get_logger(__name__)
TOPIC_CHECK_SECONDS = 5.0


class AckConsumer:
    def __init__(self, settings: Settings, messages: MessageStore, apps: AppStore) -> None:
        self._settings = settings
        self._messages = messages
        self._apps = apps
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
                bootstrap_servers=self._settings.kafka_bootstrap_servers,
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
                await self.apply([AckRecord(r.value, r.headers) for r in records])
                await consumer.commit()
            self._outage.succeeded()

    async def _ack_topic_exists(self) -> bool:
        """Whether the cluster has the ack topic; a cluster that does not create topics on
        first use needs ``rms topics create``. Unknown (cluster unreachable) counts as yes:
        the consumer's own failure then tells of the outage."""
        topic = self._settings.ack_topic
        client = AIOKafkaClient(bootstrap_servers=self._settings.kafka_bootstrap_servers,
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

    async def apply(self, records: Iterable[AckRecord]) -> int:
        """Apply a batch of ack records; returns how many messages became ``done``. A record
        that is malformed, not signed by its consumer app (when signatures are required), or
        names an app that may not consume the message's topic changes nothing and is counted
        by reason."""
        by_consumer: dict[str, list[tuple[str, AckRecord]]] = defaultdict(list)
        for record in records:
            parsed = parse_ack(record.value)
            if parsed is None:
                self._reject("malformed")
                continue
            by_consumer[parsed[1]].append((parsed[0], record))
        applied = 0
        for consumer, acks in by_consumer.items():
            ids = await self._permitted(consumer, acks)
            done = await self._messages.ack_many(ids, actor=f"app:{consumer}", via="ack-topic")
            metrics.ACKS.labels("ack-topic").inc(len(done))
            applied += len(done)
        return applied

    async def _permitted(self, consumer: str, acks: list[tuple[str, AckRecord]]) -> list[str]:
        """The ids of ``acks`` that ``consumer`` signed and may acknowledge."""
        try:
            app = await self._apps.get(consumer)
        except NotFound:
            self._reject("unknown-consumer", len(acks), consumer=consumer)
            return []
        secrets = [s for s in (app.signing_secret, app.previous_signing_secret) if s]
        required = self._settings.ack_signatures == "required"
        ids = []
        for message_id, record in acks:
            problem = signature_problem(record, secrets, required=required)
            if problem is None:
                ids.append(message_id)
            else:
                self._reject(problem, consumer=consumer, message_id=message_id)
        topics = await self._messages.topics(ids)
        allowed = [i for i, topic in topics.items() if topic_allowed(topic, app.consume_topics)]
        if len(ids) > len(allowed):
            self._reject("not-permitted-or-unknown", len(ids) - len(allowed), consumer=consumer)
        return allowed

    @staticmethod
    def _reject(reason: Rejection, count: int = 1, **context: str) -> None:
        metrics.ACKS_REJECTED.labels(reason).inc(count)
        log.warning("ack_consumer.rejected", reason=reason, count=count, **context)
