"""Run by the virtual environment that holds only the ``rms-client`` distribution (installed
with its ``sqlalchemy`` extra and nothing else), against a live RMS (the environment of
:func:`tests.system.clients.fixtures.client_env`): a consumer given an app name that is not
the app of its API key refuses to start, with a log line that says so, and consumes nothing;
under its key's app it starts in the app's own consumer group; told another group it warns.
Exits 0 when all of that happened; imports nothing of the server."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import MutableMapping
from typing import Any

import httpx
import structlog.testing
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from rms_client import HttpAcker, RmsConsumer, RmsRecord, WrongApp, ensure_inbox

RMS = os.environ["RMS_URL"]
PREFIX = os.environ["RMS_TEST_PREFIX"]
TOPIC = f"checked.{PREFIX}"
BOOTSTRAP = os.environ["RMS_KAFKA_BOOTSTRAP_SERVERS"]


async def handle(conn: AsyncConnection, record: RmsRecord) -> None:
    raise AssertionError(f"a refused consumer handled {record.message_id}")


async def main() -> None:
    with structlog.testing.capture_logs() as logged:
        await checks(logged)


async def checks(logged: list[MutableMapping[str, Any]]) -> None:
    def lines(event: str) -> list[str]:
        return [" ".join(str(v) for v in entry.values()) for entry in logged
                if entry["event"] == event]

    database = os.environ["RMS_TEST_DATABASE_URL"].replace("postgresql://",
                                                           "postgresql+asyncpg://", 1)
    engine = create_async_engine(database)  # the extra's driver: asyncpg
    await ensure_inbox(engine, "checked_inbox")
    admin = {"Authorization": f"Bearer {os.environ['RMS_ADMIN_TOKEN']}"}
    name = f"{PREFIX}-checked-{time.monotonic_ns() % 1_000_000}"
    async with httpx.AsyncClient(base_url=RMS, timeout=10) as http:
        created = await http.post("/v1/admin/apps", headers=admin, json={
            "name": name, "consume_topics": [TOPIC], "produce_topics": [],
            "check_url_prefixes": ["http://127.0.0.1:9/"]})
        created.raise_for_status()
        key = created.json()["api_key"]
        me = await http.get("/v1/apps/me", headers={"Authorization": f"Bearer {key}"})
        assert me.status_code == 200 and me.json()["name"] == name, me.text

    def consumer(app: str, group_id: str | None = None) -> RmsConsumer:
        return RmsConsumer(app=app, engine=engine, handler=handle, acker=HttpAcker(RMS, key),
                           bootstrap_servers=BOOTSTRAP, topics=[TOPIC], group_id=group_id,
                           inbox_table="checked_inbox")

    misspelled = consumer(name + "x")
    try:
        await misspelled.start()
    except WrongApp as exc:
        assert f"its API key is app {name!r}'s" in str(exc), exc
        assert "refusing to run" in str(exc), exc
    else:
        raise AssertionError("a consumer under another app's name started")
    finally:
        await misspelled.stop()
    assert any("refusing to run" in line for line in lines("consumer.wrong_app")), logged

    right = consumer(name)
    assert right.group_id == name, right.group_id
    async with right:
        pass
    assert not lines("consumer.group_not_app"), logged
    shared = consumer(name, group_id=f"{PREFIX}-shared")
    assert any("group of its own" in line for line in lines("consumer.group_not_app")), logged
    await shared.stop()
    await engine.dispose()
    print("a misspelled app was refused; the right one joined its own group; a shared group "
          "was warned about")


if __name__ == "__main__":
    asyncio.run(main())
