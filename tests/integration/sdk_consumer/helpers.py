"""Helpers of the consumer-SDK tests."""

from __future__ import annotations

import time
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRecord
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from rms_client.consumer import Ack, Acker, BatchReport, RmsConsumer, RmsRecord


class CountingAcker:
    """Wraps an acker and remembers every ack it was asked for."""

    def __init__(self, inner: Acker) -> None:
        self.inner = inner
        self.acks: list[Ack] = []

    async def ack(self, message_id: str, created_at: str | None = None) -> Ack:
        ack = await self.inner.ack(message_id, created_at)
        self.acks.append(ack)
        return ack

    async def close(self) -> None:
        await self.inner.close()


async def record_effect(conn: AsyncConnection, message: RmsRecord) -> None:
    """A handler: one row in the consumer's own table per processed message."""
    await conn.execute(text("INSERT INTO effects (message_id, delivery) VALUES (:id, :n)"),
                       {"id": message.message_id, "n": message.delivery})


async def scalar(engine: AsyncEngine, sql: str, **params: Any) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(text(sql), params)).scalar()


async def copy_record(bootstrap: str, record: ConsumerRecord[bytes, bytes], delivery: int) -> None:
    """Publish ``record`` again as RMS would redeliver it (same id, next delivery number)."""
    headers = [(k, v) for k, v in record.headers if k != "rms-delivery"]
    headers.append(("rms-delivery", str(delivery).encode()))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        await producer.send_and_wait(record.topic, record.value, key=record.key, headers=headers)
    finally:
        await producer.stop()


async def consume_until(consumer: RmsConsumer, done: Any, timeout: float = 30.0
                        ) -> list[BatchReport]:
    """``run_once`` until the async ``done(reports)`` is truthy."""
    reports: list[BatchReport] = []
    deadline = time.monotonic() + timeout
    while not await done(reports):
        assert time.monotonic() < deadline, f"consumer not done after {timeout}s: {reports}"
        reports.append(await consumer.run_once(timeout_ms=200))
    return reports
