"""The aiokafka producer with an explicit connection state: publishing while the broker is
unreachable fails at once with PublishError (the message stays durably ``sent`` and due, so the
recovery service publishes it later) instead of hanging the request."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from rms import metrics
from rms.config import WorkerSettings
from rms.kafka.failures import MissingTopics, PublishFailure, classify
from rms.kafka.records import OutgoingRecord
from rms.kafka.security import client_options

log = structlog.get_logger(__name__)

_PROBE_SECONDS = 1.0


class PublishError(RuntimeError):
    """The broker did not accept the record (refused, unreachable, timed out, no such topic)."""

    def __init__(self, failure: PublishFailure) -> None:
        super().__init__(failure.error)
        self.failure = failure


class ConnectionState(StrEnum):
    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    CLOSED = "closed"


class Publisher(Protocol):
    @property
    def ready(self) -> bool: ...

    async def publish(self, record: OutgoingRecord) -> None: ...

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[PublishFailure | None]: ...


def producer_options(settings: WorkerSettings) -> dict[str, Any]:
    acks: str | int = settings.kafka_acks if settings.kafka_acks == "all" else int(settings.kafka_acks)
    timeout_ms = int(settings.kafka_publish_timeout_seconds * 1000)
    return {
        **client_options(settings),
        "client_id": settings.kafka_client_id,
        "acks": acks,
        "enable_idempotence": settings.kafka_enable_idempotence,
        "linger_ms": settings.kafka_linger_ms,
        "request_timeout_ms": timeout_ms,
        "retry_backoff_ms": 100,
    }


class KafkaPublisher:
    """One producer per process, shared by every request; sends are concurrent."""

    def __init__(self, settings: WorkerSettings, reconnect_seconds: float = 1.0) -> None:
        self._options = producer_options(settings)
        # a topic the cluster lacks fails at once until the next retry is due, instead of
        # holding every publish to it (and the batch around it) for a metadata timeout
        self._missing = MissingTopics(settings.publish_retry_seconds)
        self._timeout = settings.kafka_publish_timeout_seconds
        self._reconnect_seconds = reconnect_seconds
        self._producer: AIOKafkaProducer | None = None
        self._connector: asyncio.Task[None] | None = None
        self.state = ConnectionState.IDLE
        self._connected = asyncio.Event()
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def ready(self) -> bool:
        return self.state is ConnectionState.CONNECTED

    async def start(self, wait_seconds: float = 0.0) -> None:
        """Connect in the background (a broker that is down at start-up must not stop the API);
        wait up to ``wait_seconds`` for the first connection."""
        self.state = ConnectionState.CONNECTING
        self._connector = asyncio.create_task(self._connect_loop(), name="kafka-connect")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._connected.wait(), wait_seconds)

    async def stop(self) -> None:
        self.state = ConnectionState.CLOSED
        if self._connector is not None:
            self._connector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._connector
        if self._producer is not None:
            with contextlib.suppress(KafkaError, OSError):
                await self._producer.stop()
            self._producer = None
        await asyncio.gather(*self._closing)

    async def publish(self, record: OutgoingRecord) -> None:
        producer = self._usable_producer()
        if producer is None:
            raise PublishError(self._not_connected())
        if (known := self._missing.failure(record.topic)) is not None:
            raise PublishError(known)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout):
                delivery = await producer.send(record.topic, record.value, key=record.key,
                                               headers=record.headers)
                await delivery
        except (KafkaError, TimeoutError, OSError) as exc:
            raise PublishError(await self._failure(record.topic, exc)) from exc
        metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[PublishFailure | None]:
        """Hand every record to the producer at once (it batches them per partition) and wait
        for all answers within one publish timeout. Returns, per record, None when the broker
        accepted it, else why not (as :class:`PublishError` would say it)."""
        producer = self._usable_producer()
        if producer is None:
            return [self._not_connected()] * len(records)
        started = time.perf_counter()
        unknown = {r.topic for r in records if self._missing.failure(r.topic) is None}
        await asyncio.gather(*(self._check_topic(producer, topic) for topic in unknown))
        errors = [self._missing.failure(record.topic) for record in records]
        sendable = [index for index, error in enumerate(errors) if error is None]
        pending: dict[asyncio.Future[Any], int] = {}
        try:
            async with asyncio.timeout(self._timeout):
                for index in sendable:
                    pending[await _send(producer, records[index])] = index
                if pending:
                    await asyncio.wait(pending)
        except (KafkaError, TimeoutError, OSError) as exc:
            by_topic = {t: await self._failure(t, exc) for t in {records[i].topic for i in sendable}}
            for index in sendable:  # the send loop failed: nothing is known
                errors[index] = by_topic[records[index].topic]
        for future, index in pending.items():
            if future.done():
                errors[index] = await self._answer(records[index].topic, future)
        metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)
        return errors

    async def _check_topic(self, producer: AIOKafkaProducer, topic: str) -> None:
        """Metadata for ``topic`` before a batch sends to it, so that one topic the cluster
        lacks fails alone instead of stalling the records queued behind it."""
        if producer.client.cluster.partitions_for_topic(topic) is not None:
            return
        try:
            async with asyncio.timeout(self._timeout):
                await producer.client._wait_on_metadata(topic)
        except (KafkaError, TimeoutError, OSError) as exc:
            await self._failure(topic, exc)

    def _not_connected(self) -> PublishFailure:
        return PublishFailure("broker-unavailable", f"Kafka producer is {self.state.value}")

    def _usable_producer(self) -> AIOKafkaProducer | None:
        """The connected producer, unless its sender has stopped (a fatal error ends it)."""
        producer = self._producer
        if producer is None or not self.ready:
            return None
        sender = producer._sender.sender_task
        if sender is not None and sender.done():
            self._reset("the producer's sender stopped")
            return None
        return producer

    def _reset(self, why: str) -> None:
        """Replace the producer: a new one gets a new producer id and sequence numbers. The
        records it had not published are published again by the caller's retry (at least
        once; consumers deduplicate by ``rms-message-id``)."""
        if self.state is not ConnectionState.CONNECTED:
            return
        log.warning("kafka.producer_reset", reason=why)
        metrics.PRODUCER_RESETS.inc()
        old, self._producer = self._producer, None
        self.state = ConnectionState.CONNECTING
        self._connected.clear()
        if old is not None:
            closing = asyncio.create_task(_stop_quietly(old))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        self._connector = asyncio.create_task(self._connect_loop(), name="kafka-reconnect")

    async def _failure(self, topic: str, exc: BaseException) -> PublishFailure:
        failure = classify(exc)
        if failure.reason == "producer-reset":
            self._reset(failure.error)
        if failure.reason in ("timeout", "topic-missing"):
            failure = await self._probe(topic, failure)
        if failure.reason == "topic-missing":
            self._missing.add(topic)
        return failure

    async def _probe(self, topic: str, failure: PublishFailure) -> PublishFailure:
        """A timeout and an absent topic look alike to the producer (it waits for metadata in
        both cases): one short metadata request tells a missing topic from a lost cluster."""
        producer = self._producer
        try:
            if producer is None:
                raise KafkaError("no producer")
            async with asyncio.timeout(_PROBE_SECONDS):
                cluster = await producer.client.fetch_all_metadata()
        except (KafkaError, TimeoutError, OSError):
            return PublishFailure("broker-unavailable", failure.error)
        if topic in cluster.topics():
            return PublishFailure("timeout", failure.error)
        return PublishFailure("topic-missing", f"topic {topic!r} does not exist on the cluster")

    async def _answer(self, topic: str, future: asyncio.Future[Any]) -> PublishFailure | None:
        """None when the broker accepted the record, else why not."""
        if future.cancelled():
            return PublishFailure("timeout", "CancelledError")
        exc = future.exception()
        return None if exc is None else await self._failure(topic, exc)

    async def _connect_loop(self) -> None:
        while self.state is ConnectionState.CONNECTING:
            producer = AIOKafkaProducer(**self._options)
            try:
                await producer.start()
            except (KafkaError, OSError) as exc:
                log.warning("kafka.connect_failed", error=str(exc))
                with contextlib.suppress(KafkaError, OSError):
                    await producer.stop()
                await asyncio.sleep(self._reconnect_seconds)
                continue
            self._producer = producer
            self.state = ConnectionState.CONNECTED
            self._connected.set()
            log.info("kafka.connected", servers=self._options["bootstrap_servers"])


async def _stop_quietly(producer: AIOKafkaProducer) -> None:
    with contextlib.suppress(Exception):
        await producer.stop()


async def _send(producer: AIOKafkaProducer, record: OutgoingRecord) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = await producer.send(record.topic, record.value, key=record.key,
                                                      headers=record.headers)
    return future


async def broker_reachable(publisher: KafkaPublisher, within: float = 2.0) -> bool:
    """For /readyz: the producer is connected and the cluster answers a metadata request."""
    producer = publisher._producer
    if producer is None or not publisher.ready:
        return False
    try:
        async with asyncio.timeout(within):
            await producer.client.fetch_all_metadata()
    except (KafkaError, TimeoutError, OSError):
        return False
    return True
