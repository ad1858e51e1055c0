"""PostgreSQL short of a resource (SQLSTATE class 53: disk full, out of memory, too many
connections, a configuration limit) answers 503 with Retry-After on every path, never 500; a
full disk names itself (``database-full``). tests/system/faults/test_full_disks.py fills a real disk;
here a real PostgreSQL raises each SQLSTATE from a trigger, through SQLAlchemy (admin writes)
and through the driver (the coalesced prepare)."""

from __future__ import annotations

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from message_service import problems
from tests.support import CHECK_PREFIX, Api

RESOURCES = {"53100": "database-full", "53200": "unavailable", "53300": "unavailable",
             "53400": "unavailable"}
RETRY_AFTER = {"database-full": "30", "unavailable": "1"}


def assert_refused(response: httpx.Response, slug: str) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["type"] == f"https://rms.dev/problems/{slug}", response.text
    assert response.headers["Retry-After"] == RETRY_AFTER[slug]


async def raise_on_insert(api: Api, table: str, sqlstate: str) -> None:
    engine = create_async_engine(api.settings.database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(
                f"CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$"))
            await conn.execute(text(f"CREATE TRIGGER refuse BEFORE INSERT ON {table} "
                                    f"FOR EACH ROW EXECUTE FUNCTION refuse()"))
    finally:
        await engine.dispose()


@pytest.mark.parametrize(("sqlstate", "slug"), RESOURCES.items())
async def test_admin_write_short_of_a_resource_is_503(api: Api, sqlstate: str, slug: str
                                                       ) -> None:
    await raise_on_insert(api, "apps", sqlstate)
    response = await api.client.post("/v1/admin/apps", headers=api.admin, json={
        "name": "refused", "produce_topics": ["x.*"], "consume_topics": ["none"],
        "check_url_prefixes": []})
    assert_refused(response, slug)


async def test_prepare_on_a_full_disk_is_503_database_full(api: Api, topic: str) -> None:
    keys = await api.create_app("producer", produce=[f"{topic}*"])
    await raise_on_insert(api, "messages", "53100")
    response = await api.client.post("/v1/messages", headers=keys.headers,
                                     json={"message_id": "m-1", "topic": topic, "payload": 1,
                                           "check_url": f"{CHECK_PREFIX}status"})
    assert_refused(response, "database-full")


@pytest.mark.parametrize(("sqlstate", "slug"), RESOURCES.items())
async def test_driver_errors_short_of_a_resource_are_503(sqlstate: str, slug: str) -> None:
    app = FastAPI()
    problems.install(app)
    error = asyncpg.PostgresError.get_message_class_for_sqlstate(sqlstate)

    @app.get("/boom")
    async def boom() -> None:
        raise error("refused")

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://rms.test") as client:
        assert_refused(await client.get("/boom"), slug)


async def test_confirm_and_ack_on_a_full_disk_are_503_database_full(api: Api, topic: str
                                                                     ) -> None:
    producer = await api.create_app("producer", produce=[f"{topic}*"], consume=["none"])
    consumer = await api.create_app("consumer", produce=["none"], consume=[f"{topic}*"])
    prepared = await api.prepared_id(producer, topic)
    sent = await api.post(producer, "/v1/messages/send", json={
        "topic": topic, "payload": 2, "check_url": f"{CHECK_PREFIX}status"})
    assert sent.status_code == 201, sent.text
    await raise_on_insert(api, "message_events", "53100")  # every transition writes an event
    assert_refused(await api.post(producer, f"/v1/messages/{prepared}/confirm"),
                   "database-full")
    assert_refused(await api.post(consumer, f"/v1/messages/{sent.json()['message_id']}/ack"),
                   "database-full")
