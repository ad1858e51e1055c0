"""Run by a virtual environment that holds only the ``rms-client`` distribution (with its
``sqlalchemy`` extra), the service's database driver and its ASGI server, against a live RMS
(the environment of :func:`tests.system.clients.fixtures.client_env`): a prepare -> confirm in a
local transaction, a check-back answered by the client's endpoint, and a consumer that
acknowledges both messages. Exits 0 when all three happened; imports nothing of the server."""

from __future__ import annotations

import asyncio
import os
import socket

import httpx
import uvicorn
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from rms_client import (
    Barrier,
    CheckRequest,
    HttpAcker,
    RmsConsumer,
    RmsProducer,
    RmsRecord,
    checkback_app,
    ensure_inbox,
)
from rms_client.checkback import CheckStatus

SECONDS = 60.0
RMS = os.environ["RMS_URL"]
PREFIX = os.environ["RMS_TEST_PREFIX"]
TOPIC = f"orders.{PREFIX}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def create_app(check_prefix: str) -> dict[str, str]:
    admin = {"Authorization": f"Bearer {os.environ['RMS_ADMIN_TOKEN']}"}
    async with httpx.AsyncClient(base_url=RMS, timeout=10) as http:
        created = await http.post("/v1/admin/apps", headers=admin, json={
            "name": f"{PREFIX}-py", "produce_topics": [TOPIC], "consume_topics": [TOPIC],
            "check_url_prefixes": [check_prefix]})
    created.raise_for_status()
    return dict(created.json())


async def state_becomes(rms: RmsProducer, message_id: str, state: str) -> None:
    for _ in range(int(SECONDS / 0.2)):
        found = (await rms.get(message_id)).state
        if found == state:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{message_id} stayed {found}, not {state}")


async def confirmed_in_a_local_transaction(rms: RmsProducer, engine: AsyncEngine,
                                           barrier: Barrier, check_url: str) -> str:
    async with rms.transaction(TOPIC, {"step": "confirm"}, check_url=check_url) as message, \
            engine.begin() as conn:
        await barrier.mark_committed(conn, message.message_id)
    await state_becomes(rms, message.message_id, "sent")
    return message.message_id


async def confirmed_by_check_back(rms: RmsProducer, engine: AsyncEngine, barrier: Barrier,
                                  check_url: str, asked: list[str]) -> str:
    """Prepared and committed locally but never confirmed: RMS asks the endpoint."""
    message = await rms.prepare(TOPIC, {"step": "check-back"}, check_url=check_url,
                                check_after_seconds=1)
    async with engine.begin() as conn:
        await barrier.mark_committed(conn, message.message_id)
    await state_becomes(rms, message.message_id, "sent")
    assert message.message_id in asked, f"the endpoint was not asked: {asked}"
    return message.message_id


async def consumed_and_acknowledged(rms: RmsProducer, engine: AsyncEngine, api_key: str,
                                    expected: set[str]) -> None:
    handled: list[str] = []

    async def handle(conn: AsyncConnection, record: RmsRecord) -> None:
        await conn.execute(text("SELECT 1"))
        handled.append(record.message_id)

    async with RmsConsumer(app=f"{PREFIX}-py", engine=engine, handler=handle,
                           acker=HttpAcker(RMS, api_key),
                           bootstrap_servers=os.environ["RMS_KAFKA_BOOTSTRAP_SERVERS"],
                           group_id=f"{PREFIX}-py", topics=[TOPIC],
                           kafka_options={"metadata_max_age_ms": 1000}) as consumer:
        async with asyncio.timeout(SECONDS):
            while not expected <= set(handled):
                await consumer.run_once()
    for message_id in expected:
        await state_becomes(rms, message_id, "done")


async def main() -> None:
    port = free_port()
    check_url = f"http://127.0.0.1:{port}/rms/check"
    created = await create_app(f"http://127.0.0.1:{port}/")
    database = os.environ["RMS_TEST_DATABASE_URL"].replace("postgresql://",
                                                           "postgresql+asyncpg://", 1)
    engine = create_async_engine(database)
    barrier = Barrier(engine)
    await barrier.create_table()
    await ensure_inbox(engine)
    asked: list[str] = []

    async def resolve(check: CheckRequest) -> CheckStatus:
        asked.append(check.message_id)
        return await barrier.resolve(check)

    endpoint = checkback_app(resolve, secrets=[created["signing_secret"]])
    server = uvicorn.Server(uvicorn.Config(endpoint, host="127.0.0.1", port=port,
                                           log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        async with RmsProducer(RMS, created["api_key"]) as rms:
            first = await confirmed_in_a_local_transaction(rms, engine, barrier, check_url)
            second = await confirmed_by_check_back(rms, engine, barrier, check_url, asked)
            await consumed_and_acknowledged(rms, engine, created["api_key"], {first, second})
    finally:
        server.should_exit = True
        await serving
        await engine.dispose()
    print(f"ok: {first} confirmed, {second} confirmed by check-back, both acknowledged")


if __name__ == "__main__":
    asyncio.run(main())
