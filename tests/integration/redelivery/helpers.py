"""Helpers of the recovery tests: direct SQL for set-up (make due, make dead, seed many) and
reading who published what."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import ConsumerRecord
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.kafka.records import header
from rms.usecases.redelivery import RedeliveryWorker
from rms.usecases.reports import Report
from tests.support import Api


@dataclass
class SqlHelper:
    engine: AsyncEngine

    async def execute(self, sql: str, **params: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(text(sql), params)

    async def scalar(self, sql: str, **params: Any) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(text(sql), params)).scalar()

    async def rows(self, sql: str, **params: Any) -> list[Any]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(text(sql), params)).all())

    async def make_due(self, ids: Sequence[str]) -> None:
        await self.execute("UPDATE messages SET next_delivery_at = now() - interval '1 second' "
                           "WHERE message_id = ANY(:ids)", ids=list(ids))

    async def make_dead(self, ids: Sequence[str], reason: str = "delivery-exhausted") -> None:
        await self.execute("UPDATE messages SET dead = true, dead_reason = :reason, "
                           "next_delivery_at = NULL WHERE message_id = ANY(:ids)",
                           ids=list(ids), reason=reason)

    async def seed_sent(self, app: str, topic: str, count: int, *, prefix: str = "m",
                        due: bool = True, ack_timeout: float = 60.0) -> list[str]:
        """``count`` sent messages whose first delivery went out (delivery_count 1)."""
        await self.execute(
            "INSERT INTO messages (message_id, app, topic, payload, state, check_after_seconds, "
            "max_checks, ack_timeout_seconds, max_deliveries, confirmed_at, delivery_count, "
            "next_delivery_at) "
            "SELECT :prefix || '-' || n, :app, :topic, jsonb_build_object('n', n), 'sent', 10, "
            "15, :ack_timeout, 6, now(), 1, "
            "CASE WHEN :due THEN now() - interval '1 second' ELSE now() + interval '1 hour' END "
            "FROM generate_series(1, :count) AS n",
            prefix=prefix, app=app, topic=topic, count=count, due=due, ack_timeout=ack_timeout)
        return [f"{prefix}-{n}" for n in range(1, count + 1)]


async def tick_until(worker: RedeliveryWorker, done: Any, timeout: float = 20.0,
                     interval: float = 0.05) -> list[Report]:
    """Tick the worker (as the scheduler would) until the async ``done()`` is truthy."""
    reports: list[Report] = []
    deadline = time.monotonic() + timeout
    while not await done():
        assert time.monotonic() < deadline, f"not done after {timeout}s; ticks: {reports[-3:]}"
        reports.append(await worker.tick())
        await asyncio.sleep(interval)
    return reports


async def message(api: Api, message_id: str) -> dict[str, Any]:
    response = await api.client.get(f"/v1/admin/messages/{message_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def events(api: Api, message_id: str) -> list[dict[str, Any]]:
    response = await api.client.get(f"/v1/admin/messages/{message_id}/events",
                                    headers=api.admin)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["events"]
    return found


def deliveries(records: Sequence[ConsumerRecord[bytes, bytes]]) -> Counter[tuple[str, int]]:
    """How often each ``(message_id, rms-delivery)`` pair was published."""
    pairs: Counter[tuple[str, int]] = Counter()
    for record in records:
        headers = list(record.headers)
        message_id = header(headers, "rms-message-id")
        delivery = header(headers, "rms-delivery")
        assert message_id is not None and delivery is not None
        pairs[(message_id, int(delivery))] += 1
    return pairs


async def read_until_all(bootstrap: str, topic: str, ids: Sequence[str], *, timeout: float,
                         settle: float = 0.5) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record on ``topic`` until each of ``ids`` was seen at least once, then ``settle``
    seconds more (to catch duplicates)."""
    from aiokafka import AIOKafkaConsumer

    missing = set(ids)
    records: list[ConsumerRecord[bytes, bytes]] = []
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout
        settled_at: float | None = None
        while settled_at is None or time.monotonic() < settled_at:
            assert time.monotonic() < deadline, f"{len(missing)} never published"
            batch = await consumer.getmany(timeout_ms=200)
            for record in (r for part in batch.values() for r in part):
                records.append(record)
                missing.discard(header(list(record.headers), "rms-message-id") or "")
            if not missing and settled_at is None:
                settled_at = time.monotonic() + settle
    finally:
        await consumer.stop()
    return records
