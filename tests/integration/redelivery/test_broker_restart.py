"""A broker outage, then the broker comes back with its data gone (its log directory lost):
nothing is dead-lettered early while it is down, and every confirmed, unacknowledged message is
delivered again and ends done, with exactly one effect in the consumer's database."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.devstack.embedded import EmbeddedPostgres
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.worker import worker_context
from rms_client.consumer import HttpAcker, RmsConsumer, RmsRecord, ensure_inbox
from tests.conftest import ADMIN_TOKEN
from tests.integration.redelivery.helpers import events, read_until_all
from tests.support import Api

CONFIRMED_BEFORE, CONFIRMED_DURING = 20, 5


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedKafka]:
    own = EmbeddedKafka(tmp_path / "kafka")
    own.start()
    yield own
    own.kill()


@pytest.fixture
async def points_db(postgres: EmbeddedPostgres) -> AsyncIterator[AsyncEngine]:
    name = f"p_{uuid.uuid4().hex[:16]}"
    postgres.create_database(name)
    engine = create_async_engine(postgres.url(name))
    await ensure_inbox(engine)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE effects (message_id text)"))
    yield engine
    await engine.dispose()
    postgres.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _add_effect(conn: AsyncConnection, message: RmsRecord) -> None:
    await conn.execute(text("INSERT INTO effects VALUES (:id)"), {"id": message.message_id})


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_outage_then_empty_broker_everything_delivered_once_and_done(
        settings: Settings, broker: EmbeddedKafka, points_db: AsyncEngine, topic: str,
        unique: str) -> None:
    from message_service.app import create_app

    local = settings.model_copy(update={
        "kafka_bootstrap_servers": broker.bootstrap_servers, "kafka_publish_timeout_seconds": 1.0,
        "publish_retry_seconds": 0.3})
    app = create_app(local)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="http://rms.test") as client,
                worker_context(local, "recovery-worker") as context):
        api = Api(client, ADMIN_TOKEN, local)
        worker = from_context(context)
        orders = await api.create_app("orders", consume=["none"])
        points = await api.create_app("points", produce=["none"], consume=["orders.*"])
        policy = {"ack_timeout_seconds": 1.0, "max_deliveries": 5}

        async def confirmed() -> str:
            message_id = await api.prepared_id(orders, topic, **policy)
            response = await api.post(orders, f"/v1/messages/{message_id}/confirm")
            assert response.status_code == 200, response.text
            return message_id

        before = [await confirmed() for _ in range(CONFIRMED_BEFORE)]
        broker.kill()
        during = list(await asyncio.gather(*(confirmed() for _ in range(CONFIRMED_DURING))))
        ids = before + during

        # the outage outlasts several ack deadlines: the worker keeps trying, counts nothing
        outage_ends = time.monotonic() + 4.0
        while time.monotonic() < outage_ends:
            await worker.tick()
            await asyncio.sleep(0.1)
        rows = await _messages(api, ids)
        assert not any(m["dead"] for m in rows.values())
        assert {rows[i]["delivery_count"] for i in before} <= {1}
        assert {rows[i]["delivery_count"] for i in during} == {0}
        assert worker.probing  # one probe per tick while every publish fails
        failures = [e for i in ids for e in await events(api, i) if e["event"] == "publish-failed"]
        assert failures  # it did try

        broker.restart_empty()  # same address, no data: no topic, no records, no offsets
        acker = HttpAcker(client=client, api_key=points.api_key)
        async with RmsConsumer(app="points", engine=points_db, handler=_add_effect, acker=acker,
                               bootstrap_servers=broker.bootstrap_servers,
                               group_id=f"points-{unique}", topics=[topic]) as consumer:
            deadline = time.monotonic() + 60
            while not all(m["state"] == "done" for m in (await _messages(api, ids)).values()):
                assert time.monotonic() < deadline, await _messages(api, ids)
                await worker.tick()
                await consumer.run_once(timeout_ms=100)

        rows = await _messages(api, ids)
        assert not any(m["dead"] for m in rows.values())
        async with points_db.connect() as conn:
            effects = (await conn.execute(text("SELECT message_id FROM effects"))).scalars().all()
        assert sorted(effects) == sorted(ids)  # once each
        records = await read_until_all(broker.bootstrap_servers, topic, ids, timeout=10)
        first_seen: dict[str, int] = {}
        for record in records:
            headers = dict(record.headers)
            first_seen.setdefault(headers["rms-message-id"].decode(),
                                  int(headers["rms-delivery"]))
        assert all(first_seen[i] >= 2 for i in before)  # re-delivered after the data loss
        assert all(first_seen[i] == 1 for i in during)  # the failed first publish was given back


async def _messages(api: Api, ids: list[str]) -> dict[str, dict[str, object]]:
    found = {}
    for message_id in ids:
        response = await api.client.get(f"/v1/admin/messages/{message_id}", headers=api.admin)
        found[message_id] = response.json()
    return found
