"""Helpers for tests: an API client wrapper and Kafka readers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from rms.config import Settings
from rms_client.ack_records import signed_ack_headers

CHECK_PREFIX = "http://127.0.0.1:1/"


@dataclass
class AppKeys:
    name: str
    api_key: str
    signing_secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


@dataclass
class Api:
    client: httpx.AsyncClient
    admin_token: str
    settings: Settings
    apps: dict[str, AppKeys] = field(default_factory=dict)

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    async def create_app(
        self,
        name: str,
        produce: list[str] | None = None,
        consume: list[str] | None = None,
        prefixes: list[str] | None = None,
        ordered: list[str] | None = None,
    ) -> AppKeys:
        body = {"name": name, "produce_topics": produce or ["*"],
                "consume_topics": consume or ["*"],
                "check_url_prefixes": prefixes or [CHECK_PREFIX]}
        if ordered is not None:
            body["ordered_topics"] = ordered
        response = await self.client.post("/v1/admin/apps", json=body, headers=self.admin)
        assert response.status_code == 201, response.text
        data = response.json()
        if ordered is not None:
            assert data["ordered_topics"] == ordered, data
        keys = AppKeys(name, data["api_key"], data["signing_secret"])
        self.apps[name] = keys
        return keys

    async def prepare(self, app: AppKeys, topic: str, **fields: Any) -> httpx.Response:
        body: dict[str, Any] = {"topic": topic, "payload": {"n": 1},
                                "check_url": CHECK_PREFIX + "check"} | fields
        return await self.client.post("/v1/messages", json=body, headers=app.headers)

    async def prepared_id(self, app: AppKeys, topic: str, **fields: Any) -> str:
        response = await self.prepare(app, topic, **fields)
        assert response.status_code == 201, response.text
        return str(response.json()["message_id"])

    async def post(self, app: AppKeys, path: str, **kwargs: Any) -> httpx.Response:
        return await self.client.post(path, headers=app.headers, **kwargs)

    async def ack_body(self, owner: AppKeys, message_id: str, consumer: str) -> dict[str, str]:
        """The value of ``consumer``'s ack record of ``message_id`` (owned by ``owner``), naming
        the instance stored now by its ``created_at``."""
        response = await self.client.get(f"/v1/messages/{message_id}", headers=owner.headers)
        assert response.status_code == 200, response.text
        return {"message_id": message_id, "consumer": consumer,
                "created_at": str(response.json()["created_at"])}


async def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Make ``topic`` on a cluster that creates none on first use (one replica)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=1)])
    finally:
        await admin.close()


async def read_topic(bootstrap: str, topic: str, *, expect: int, timeout: float = 10.0,
                     settle: float = 0.0, options: dict[str, Any] | None = None,
                     ) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record on ``topic`` from the start; waits until ``expect`` arrived (or timeout),
    then ``settle`` seconds more to catch any extra (for 'no duplicate' assertions).
    ``options``: TLS and SASL client options (:mod:`rms.kafka.security`)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None, **(options or {}))
    await consumer.start()
    records: list[ConsumerRecord[bytes, bytes]] = []
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(records) < expect:
            batch = await consumer.getmany(timeout_ms=200)
            records += [r for part in batch.values() for r in part]
        settle_until = time.monotonic() + settle
        while time.monotonic() < settle_until:
            batch = await consumer.getmany(timeout_ms=100)
            records += [r for part in batch.values() for r in part]
    finally:
        await consumer.stop()
    return records


async def produce(bootstrap: str, topic: str, values: list[dict[str, Any]],
                  signing_secret: str | None = None) -> None:
    """Write ``values`` as JSON records; signed as ack records when ``signing_secret`` is
    given (the key of the app each ack names)."""
    raws = (orjson.dumps(value) for value in values)
    await write_records(bootstrap, topic, (
        (raw, signed_ack_headers([signing_secret], raw) if signing_secret else None)
        for raw in raws))


RawRecord = tuple[bytes, Sequence[tuple[str, bytes | None]] | None]


async def write_records(bootstrap: str, topic: str, records: Iterable[RawRecord]) -> None:
    """Write ``records`` (value, headers) exactly as given, each acknowledged before the next."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for value, headers in records:
            await producer.send_and_wait(topic, value, headers=headers)
    finally:
        await producer.stop()


async def eventually(check: Any, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll the async ``check`` until it returns a truthy value; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")
