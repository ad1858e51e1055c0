"""Run by the virtual environment that holds only the ``rms-client`` distribution, against a
live RMS (the environment of :func:`tests.system.clients.fixtures.client_env`): two consumer apps on
one topic. ``points`` handles the message and acks it; ``billing`` handles it and its process
dies as it acks (nothing acked, no offset committed). RMS redelivers the message naming only
``billing`` in ``rms-awaiting``: the points consumer skips the redelivery, billing's restarted
consumer handles it (its inbox knows the id) and acks, and the message is done with both acks.
Exits 0 when all of that happened; imports nothing of the server."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from rms_client import Ack, HttpAcker, RmsConsumer, RmsProducer, RmsRecord, ensure_inbox
from rms_client.consumer import BatchReport, Outcome

SECONDS = 60.0
RMS = os.environ["RMS_URL"]
PREFIX = os.environ["RMS_TEST_PREFIX"]
TOPIC = f"paid.{PREFIX}"
BOOTSTRAP = os.environ["RMS_KAFKA_BOOTSTRAP_SERVERS"]


class Crash(BaseException):
    """The consumer's process dying: no handler of the consumer catches it."""


class CrashingAcker:
    """Dies at the first ack, as a process killed after its handler committed would."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def ack(self, message_id: str, created_at: str | None = None) -> Ack:
        self.asked.append(message_id)
        raise Crash(message_id)

    async def close(self) -> None:
        return None


async def create_app(http: httpx.AsyncClient, name: str, produce: list[str],
                     consume: list[str]) -> dict[str, Any]:
    admin = {"Authorization": f"Bearer {os.environ['RMS_ADMIN_TOKEN']}"}
    created = await http.post("/v1/admin/apps", headers=admin, json={
        "name": f"{PREFIX}-{name}", "produce_topics": produce, "consume_topics": consume,
        "check_url_prefixes": ["http://127.0.0.1:9/"]})
    created.raise_for_status()
    return dict(created.json())


class Service:
    """A consumer app: its own inbox table and effects table, its own consumer group."""

    def __init__(self, app: dict[str, Any], engine: AsyncEngine) -> None:
        self.name = str(app["name"])
        self.api_key = str(app["api_key"])
        self.engine = engine
        self.table = self.name.replace("-", "_")
        self.outcomes: list[tuple[str, Outcome]] = []

    async def prepare(self) -> None:
        await ensure_inbox(self.engine, f"{self.table}_inbox")
        async with self.engine.begin() as conn:
            await conn.execute(text(f"CREATE TABLE {self.table}_effects (message_id text)"))

    async def handle(self, conn: AsyncConnection, record: RmsRecord) -> None:
        await conn.execute(text(f"INSERT INTO {self.table}_effects VALUES (:id)"),
                           {"id": record.message_id})

    def consumer(self, acker: Any = None) -> RmsConsumer:
        return RmsConsumer(app=self.name, engine=self.engine, handler=self.handle,
                           acker=acker or HttpAcker(RMS, self.api_key),
                           bootstrap_servers=BOOTSTRAP, group_id=self.name, topics=[TOPIC],
                           inbox_table=f"{self.table}_inbox",
                           kafka_options={"metadata_max_age_ms": 1000})

    async def poll(self, consumer: RmsConsumer) -> BatchReport:
        report = await consumer.run_once(timeout_ms=200)
        self.outcomes += report.outcomes
        return report

    async def effects(self, message_id: str) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(text(
                f"SELECT count(*) FROM {self.table}_effects WHERE message_id = :id"),
                {"id": message_id})).scalar_one())


async def until(what: str, done: Any, *polls: tuple[Service, RmsConsumer]) -> None:
    deadline = time.monotonic() + SECONDS
    while not await done():
        assert time.monotonic() < deadline, f"not within {SECONDS:g}s: {what}"
        for service, consumer in polls:
            await service.poll(consumer)


async def main() -> None:
    database = os.environ["RMS_TEST_DATABASE_URL"].replace("postgresql://",
                                                           "postgresql+asyncpg://", 1)
    engine = create_async_engine(database)
    async with httpx.AsyncClient(base_url=RMS, timeout=10) as http:
        shop = await create_app(http, "shop", [TOPIC], [])
        points = Service(await create_app(http, "points", [], [TOPIC]), engine)
        billing = Service(await create_app(http, "billing", [], [TOPIC]), engine)
        for service in (points, billing):
            await service.prepare()
        rms = RmsProducer(RMS, shop["api_key"], default_check_url="http://127.0.0.1:9/check")
        sent = await rms.send(TOPIC, {"order": 7}, ack_timeout_seconds=2)
        message_id = sent.message_id

        # billing handles the record and dies as it acks: its offset stays uncommitted
        crashing = CrashingAcker()
        dying = billing.consumer(crashing)
        await dying.start()
        try:
            await until("billing to handle the record", lambda: _true(crashing.asked),
                        (billing, dying))
        except Crash:
            pass
        finally:
            await dying.stop()
        assert crashing.asked == [message_id], crashing.asked
        assert await billing.effects(message_id) == 1

        async with points.consumer() as reader:
            await until("points to handle and ack the message, then skip its redelivery",
                        lambda: _true((message_id, Outcome.NOT_AWAITED) in points.outcomes),
                        (points, reader))
        assert next(o for i, o in points.outcomes if i == message_id) is Outcome.PROCESSED
        assert await points.effects(message_id) == 1, "the skipped redelivery touched nothing"
        waiting = await rms.get(message_id)
        assert waiting.state == "sent" and waiting.delivery_count >= 2, waiting

        async with billing.consumer() as restarted:
            await until("billing's restarted consumer to ack", lambda: _done(http, message_id),
                        (billing, restarted))
        assert {o for i, o in billing.outcomes if i == message_id} == {Outcome.DUPLICATE}
        assert await billing.effects(message_id) == 1, "the inbox kept billing's effect once"
        message = (await http.get(f"/v1/messages/{message_id}",
                                  headers={"Authorization": f"Bearer {shop['api_key']}"})).json()
        acks = {s["app"]: s for s in message["subscribers"]}
        assert set(acks) == {points.name, billing.name}, message
        assert all(s["acked_at"] and s["via"] == "http" for s in acks.values()), message
        await rms.aclose()
    await engine.dispose()
    print(f"{message_id}: points acked and skipped the redelivery; billing crashed before its "
          "ack, was redelivered, acked; done with both acks")


async def _true(value: object) -> bool:
    return bool(value)


async def _done(http: httpx.AsyncClient, message_id: str) -> bool:
    admin = {"Authorization": f"Bearer {os.environ['RMS_ADMIN_TOKEN']}"}
    found = await http.get(f"/v1/admin/messages/{message_id}", headers=admin)
    return bool(found.json().get("state") == "done")


if __name__ == "__main__":
    asyncio.run(main())
