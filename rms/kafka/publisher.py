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
from rms.config import Settings
from rms.kafka.records import OutgoingRecord

log = structlog.get_logger(__name__)


class PublishError(RuntimeError):
    """The broker did not accept the record (refused, unreachable or timed out)."""


class ConnectionState(StrEnum):
    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    CLOSED = "closed"


class Publisher(Protocol):
    @property
    def ready(self) -> bool: ...

    async def publish(self, record: OutgoingRecord) -> None: ...

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[str | None]: ...


def producer_options(settings: Settings) -> dict[str, Any]:
    acks: str | int = settings.kafka_acks if settings.kafka_acks == "all" else int(settings.kafka_acks)
    timeout_ms = int(settings.kafka_publish_timeout_seconds * 1000)
    return {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "client_id": settings.kafka_client_id,
        "acks": acks,
        "enable_idempotence": settings.kafka_enable_idempotence,
        "linger_ms": settings.kafka_linger_ms,
        "request_timeout_ms": timeout_ms,
        "retry_backoff_ms": 100,
    }


class KafkaPublisher:
    """One producer per process, shared by every request; sends are concurrent."""

    def __init__(self, settings: Settings, reconnect_seconds: float = 1.0) -> None:
        self._options = producer_options(settings)
        self._timeout = settings.kafka_publish_timeout_seconds
        self._reconnect_seconds = reconnect_seconds
        self._producer: AIOKafkaProducer | None = None
        self._connector: asyncio.Task[None] | None = None
        self.state = ConnectionState.IDLE
        self._connected = asyncio.Event()

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

    async def publish(self, record: OutgoingRecord) -> None:
        producer = self._producer
        if producer is None or not self.ready:
            raise PublishError(f"Kafka producer is {self.state.value}")
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self._timeout):
                delivery = await producer.send(record.topic, record.value, key=record.key,
                                               headers=record.headers)
                await delivery
        except (KafkaError, TimeoutError, OSError) as exc:
            raise PublishError(f"{type(exc).__name__}: {exc}") from exc
        metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[str | None]:
        """Hand every record to the producer at once (it batches them per partition) and wait
        for all answers within one publish timeout. Returns, per record, None when the broker
        accepted it, else why not (as :class:`PublishError` would say it)."""
        producer = self._producer
        if producer is None or not self.ready:
            return [f"Kafka producer is {self.state.value}"] * len(records)
        started = time.perf_counter()
        errors: list[str | None] = [None] * len(records)
        pending: dict[asyncio.Future[Any], int] = {}
        try:
            async with asyncio.timeout(self._timeout):
                for index, record in enumerate(records):
                    pending[await _send(producer, record)] = index
                if pending:
                    await asyncio.wait(pending)
        except (KafkaError, TimeoutError, OSError) as exc:
            errors = [_error(exc)] * len(records)  # the send loop failed: nothing is known
        for future, index in pending.items():
            if future.done():
                errors[index] = _answer(future)
        metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)
        return errors

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


async def _send(producer: AIOKafkaProducer, record: OutgoingRecord) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = await producer.send(record.topic, record.value, key=record.key,
                                                      headers=record.headers)
    return future


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _answer(future: asyncio.Future[Any]) -> str | None:
    """None when the broker accepted the record, else the error text."""
    if future.cancelled():
        return "CancelledError"
    exc = future.exception()
    return None if exc is None else _error(exc)


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
