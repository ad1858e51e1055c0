"""Several API replicas share the ack topic in one consumer group. Poisoned records on every
partition are judged and committed past without an exception, so no replica restarts its
consumer and the group never rebalances: an observer member of the same group sees no new
assignment while the poison and the valid acks behind it are consumed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client import REGISTRY

from rms.config import Settings
from rms.kafka.security import client_options
from rms.kafka.topics import create_topics
from rms_client.ack_records import signed_ack_headers
from tests.conftest import ADMIN_TOKEN
from tests.support import Api, AppKeys, eventually


class Rebalances(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.assignments = 0

    async def on_partitions_revoked(self, revoked: Any) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.assignments += 1


@contextlib.asynccontextmanager
async def replica(settings: Settings) -> AsyncIterator[None]:
    """One more API process's worth of RMS: its ack consumer joins the same group."""
    from message_service.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield


@contextlib.asynccontextmanager
async def observer(settings: Settings, topic: str, listener: Rebalances
                   ) -> AsyncIterator[None]:
    """A member of the ack consumer group on another topic: it takes no ack partition but is
    part of every rebalance of the group."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers,
                                group_id=settings.ack_consumer_group,
                                enable_auto_commit=False)
    consumer.subscribe(topics=[topic], listener=listener)
    await consumer.start()
    polling = asyncio.create_task(_poll(consumer))
    try:
        yield
    finally:
        polling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await polling
        await consumer.stop()


async def _poll(consumer: AIOKafkaConsumer) -> None:
    while True:
        await consumer.getmany(timeout_ms=200)


async def _group(settings: Settings) -> tuple[str, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap_servers)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([settings.ack_consumer_group])
    finally:
        await admin.close()
    group = response.groups[0]
    return str(group[2]), len(group[5])


def _loop_failures() -> float:
    return sum(REGISTRY.get_sample_value("rms_loop_failures_total",
                                         {"component": "ack-consumer", "cause": cause}) or 0.0
               for cause in ("database", "kafka", "other"))


async def _sent(api: Api, app: AppKeys, topic: str, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        response = await api.post(app, "/v1/messages/send", json={
            "topic": topic, "payload": 1, "check_url": "http://127.0.0.1:1/c"})
        assert response.status_code == 201, response.text
        ids.append(str(response.json()["message_id"]))
    return ids


async def _write(settings: Settings, partition: int, secret: str,
                 acks: list[dict[str, str]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers,
                                enable_idempotence=False)
    await producer.start()
    try:
        for ack in acks:
            value = orjson.dumps(ack)
            headers = signed_ack_headers([secret], value) if ack.get("consumer") else []
            await producer.send_and_wait(settings.ack_topic, value, partition=partition,
                                         headers=headers)
    finally:
        await producer.stop()


@pytest.mark.timeout(240)
async def test_poison_on_every_partition_causes_no_rebalance(settings: Settings, unique: str,
                                                             topic: str) -> None:

    from message_service.app import create_app

    side = f"observer.{unique}"
    await create_topics(client_options(settings), [settings.ack_topic], partitions=2)
    await create_topics(client_options(settings), [side], partitions=1)
    listener = Rebalances()
    app = create_app(settings)
    async with app.router.lifespan_context(app), replica(settings), \
            observer(settings, side, listener):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            api = Api(client, ADMIN_TOKEN, settings)
            orders = await api.create_app("orders", consume=["none"])
            points = await api.create_app("points", produce=["none"], consume=["orders.*"])
            await eventually(lambda: _is(_group(settings), ("Stable", 3)), timeout=60,
                             interval=0.5)
            await asyncio.sleep(3)  # let any join still in flight settle
            settled, failures = listener.assignments, _loop_failures()

            ids = await _sent(api, orders, topic, 4)
            started = time.monotonic()
            for partition, (before, behind) in enumerate((ids[:2], ids[2:])):
                poison = [{"message_id": before, "consumer": "poi\u0000nts"},
                          {"message_id": before, "consumer": "nobody"},
                          {"not": "an ack"}]
                await _write(settings, partition, points.signing_secret,
                             [*poison, await api.ack_body(orders, behind, "points")])
            for message_id in (ids[1], ids[3]):
                await eventually(lambda m=message_id: _is(_state(api, orders, m), "done"),
                                 timeout=20)
            applied_after = time.monotonic() - started
            await asyncio.sleep(3)  # a restart would rejoin within this
    assert listener.assignments == settled, "the group rebalanced"
    assert _loop_failures() == failures
    assert applied_after < 10


async def _state(api: Api, app: AppKeys, message_id: str) -> str:
    response = await api.client.get(f"/v1/messages/{message_id}", headers=app.headers)
    return str(response.json()["state"])


async def _is(value: Any, expected: Any) -> bool:
    return bool(await value == expected)


