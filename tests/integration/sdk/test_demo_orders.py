"""The demo order service end to end: real RMS API, real PostgreSQL for RMS and for the
service, real broker, the service's check-back endpoint served over HTTP and called by the
confirm worker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.devstack.demo.orders import Config, barrier_rows, create_app, orders
from rms.devstack.embedded import EmbeddedPostgres, free_port
from rms.store.database import open_engine
from rms.usecases.checkback import CheckBackWorker
from rms_client.barrier import Barrier, BarrierClosed
from rms_client.producer import RmsProducer
from tests.integration.checkback.servers import serving
from tests.support import Api, read_topic


@dataclass
class Demo:
    url: str
    http: httpx.AsyncClient
    rms: RmsProducer
    engine: AsyncEngine
    config: Config


@pytest.fixture
def orders_db(postgres: EmbeddedPostgres) -> Iterator[str]:
    """The order service's own database."""
    name = f"orders_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name)
    yield postgres.url(name)
    postgres.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def orders_engine(orders_db: str) -> AsyncIterator[AsyncEngine]:
    engine = open_engine(orders_db, pool_size=5)
    yield engine
    await engine.dispose()


@pytest.fixture
async def demo(api: Api, rms_transport: httpx.AsyncBaseTransport, orders_engine: AsyncEngine,
               topic: str, unique: str) -> AsyncIterator[Demo]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    keys = await api.create_app(f"orders-{unique}", prefixes=[url + "/"])
    config = Config(rms_url="http://rms.test", api_key=keys.api_key, database_url="unused",
                    signing_secrets=(keys.signing_secret,), public_url=url, topic=topic,
                    check_after_seconds=0.2)
    async with httpx.AsyncClient(transport=rms_transport, base_url="http://rms.test") as client:
        rms = RmsProducer(client=client, api_key=keys.api_key)
        app = create_app(config, producer=rms, engine=orders_engine)
        async with serving(app, port=port, lifespan="on"), httpx.AsyncClient(
                base_url=url, timeout=10) as http:
            yield Demo(url, http, rms, orders_engine, config)


async def order_rows(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(orders))).scalar_one())


async def resolve(worker: CheckBackWorker, demo: Demo, message_id: str, timeout: float = 15
                  ) -> str:
    """Tick until check-back resolved ``message_id``; returns its state."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        await worker.tick()
        state = (await demo.rms.get(message_id)).state
        if state != "pending-send":
            return state
        await asyncio.sleep(0.1)
    raise AssertionError(f"{message_id} still pending-send")


async def test_order_paid_is_published_once(demo: Demo, api: Api) -> None:
    response = await demo.http.post("/orders", json={"customer": "ada", "total": 42.5})
    assert response.status_code == 201, response.text
    placed = response.json()
    assert placed["message_state"] == "sent"
    assert placed["message_id"] == f"order-{placed['order_id']}-paid"
    [record] = await read_topic(api.settings.kafka_bootstrap_servers, demo.config.topic,
                                expect=1, settle=0.5)
    assert orjson.loads(record.value) == {"order_id": placed["order_id"], "customer": "ada",
                                          "total": 42.5}
    assert record.key == b"ada"
    shown = await demo.http.get(f"/orders/{placed['order_id']}")
    assert shown.json()["message_state"] == "sent"


async def test_failed_local_transaction_cancels_the_message(demo: Demo) -> None:
    response = await demo.http.post("/orders", json={"customer": "bob", "total": 1,
                                                     "simulate": "fail"})
    assert response.status_code == 402
    assert "message was cancelled" in response.json()["detail"]
    assert await order_rows(demo.engine) == 0


async def test_crash_before_confirm_is_repaired_by_check_back(
        demo: Demo, api: Api, settings: Settings) -> None:
    response = await demo.http.post("/orders", json={"customer": "cy", "total": 3,
                                                     "simulate": "crash"})
    placed = response.json()
    assert placed["message_state"] == "pending-send"
    async with checkback_worker(settings) as worker:
        assert await resolve(worker, demo, placed["message_id"]) == "sent"
    records = await read_topic(api.settings.kafka_bootstrap_servers, demo.config.topic,
                               expect=1, settle=0.5)
    assert [orjson.loads(r.value)["order_id"] for r in records] == [placed["order_id"]]


async def test_crash_before_the_local_transaction_rolls_back(demo: Demo,
                                                              settings: Settings) -> None:
    message = await demo.rms.prepare(demo.config.topic, {"order_id": "never"},
                                     message_id="order-never-paid",
                                     check_url=demo.config.check_url, check_after_seconds=0.1)
    async with checkback_worker(settings) as worker:
        assert await resolve(worker, demo, message.message_id) == "deleted"
    barrier = Barrier(demo.engine, table=barrier_rows)
    with pytest.raises(BarrierClosed):  # the late local transaction cannot commit any more
        async with demo.engine.begin() as conn:
            await barrier.mark_committed(conn, message.message_id)


async def test_check_back_during_an_open_transaction_waits_for_it(
        demo: Demo, settings: Settings) -> None:
    message = await demo.rms.prepare(demo.config.topic, {"order_id": "slow"},
                                     message_id="order-slow-paid",
                                     check_url=demo.config.check_url, check_after_seconds=0.1)
    barrier = Barrier(demo.engine, table=barrier_rows)
    async with checkback_worker(settings) as worker, demo.engine.connect() as conn:
        local = await conn.begin()
        await barrier.mark_committed(conn, message.message_id)
        await asyncio.sleep(0.2)
        checking = asyncio.create_task(worker.tick())
        await asyncio.sleep(1.0)
        assert not checking.done()  # the endpoint is waiting on the open transaction
        assert (await demo.rms.get(message.message_id)).state == "pending-send"
        await local.commit()
        await asyncio.wait_for(checking, 10)
    found = await demo.rms.get(message.message_id)
    assert (found.state, found.check_count) == ("sent", 1)


async def test_runs_as_a_process(rms_app: FastAPI, api: Api, orders_db: str, settings: Settings,
                                 topic: str, unique: str, tmp_path: Path) -> None:
    """``python -m rms.devstack.demo.orders`` as ``rms dev`` starts it, against RMS over real HTTP; its
    check-back endpoint verifies the worker's signature."""
    port = free_port()
    keys = await api.create_app(f"orders-{unique}", prefixes=[f"http://127.0.0.1:{port}/"])
    async with serving(rms_app) as rms_port:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RMS_", "DEMO_"))} | {
            "DEMO_RMS_URL": f"http://127.0.0.1:{rms_port}", "DEMO_API_KEY": keys.api_key,
            "DEMO_DATABASE_URL": orders_db, "DEMO_SIGNING_SECRET": keys.signing_secret,
            "DEMO_PORT": str(port), "DEMO_TOPIC": topic, "DEMO_CHECK_AFTER_SECONDS": "0.2",
            "RMS_LOG_JSON": "false"}
        log = tmp_path / "demo-orders.log"
        process = start_demo(port, env, log)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                await _wait_healthy(http, process, log)
                placed = await http.post("/orders", json={"customer": "dee", "total": 7})
                assert placed.json()["message_state"] == "sent", placed.text
                crashed = (await http.post("/orders", json={"customer": "eve", "total": 8,
                                                            "simulate": "crash"})).json()
                async with checkback_worker(settings) as worker:
                    for _ in range(100):
                        await worker.tick()
                        found = await http.get(f"/orders/{crashed['order_id']}")
                        if found.json()["message_state"] != "pending-send":
                            break
                        await asyncio.sleep(0.2)
                assert found.json()["message_state"] == "sent"
        finally:
            process.terminate()
            process.wait(15)
    assert "demo_orders.no_signing_secret" not in text_of(log)


def start_demo(port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "rms.devstack.demo.orders", "--port", str(port)],
                                env=env, stdout=sink, stderr=subprocess.STDOUT)


def text_of(log: Path) -> str:
    return log.read_text()


async def _wait_healthy(http: httpx.AsyncClient, process: subprocess.Popen[bytes],
                        log: Path) -> None:
    for _ in range(150):
        assert process.poll() is None, text_of(log)
        try:
            if (await http.get("/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(text_of(log))
