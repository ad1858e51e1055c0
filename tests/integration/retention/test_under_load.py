"""Retention while the request path is busy: prepares, confirms and acks of new messages, and
the confirm and ack of old open messages, keep answering while a run removes thousands of
finished messages in small batches; nothing unfinished is touched."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import asyncpg
import pytest

from history.dburl import asyncpg_dsn
from history.pacing import Pace
from history.retention import RetentionRequest, RetentionResult, run_retention
from tests.integration.retention.history import CUTOFF_AGE, archived, seed, stored_ids
from tests.support import Api, AppKeys

pytestmark = pytest.mark.spark  # pyarrow, from the spark extra


async def _traffic(api: Api, topic: str, stop: threading.Event, old_open: list[str]
                   ) -> tuple[list[str], list[float]]:
    """prepare -> confirm -> ack cycles until told to stop; old open messages are confirmed
    and acked on the way (finished now: they must stay)."""
    producer = await api.create_app("orders", consume=["none"])
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    ids, latencies = [], []

    async def call(app: AppKeys, path: str, **kwargs: object) -> None:
        started = time.perf_counter()
        response = await api.post(app, path, **kwargs)
        latencies.append(time.perf_counter() - started)
        assert response.status_code in (200, 201), response.text

    n = 0
    while not stop.is_set() or n < 10:
        message_id = f"new-{n}"
        await call(producer, "/v1/messages", json={
            "message_id": message_id, "topic": topic, "payload": {"n": n},
            "check_url": "http://127.0.0.1:1/check"})
        await call(producer, f"/v1/messages/{message_id}/confirm")
        await call(consumer, f"/v1/messages/{message_id}/ack")
        ids.append(message_id)
        if old_open:
            old = old_open.pop()
            if old.startswith("open-pending"):
                await call(api.apps["shop"], f"/v1/messages/{old}/confirm")
            await call(consumer, f"/v1/messages/{old}/ack")
        n += 1
    return ids, latencies


async def test_retention_under_request_load(api: Api, topic: str, database_url: str,
                                            tmp_path: Path) -> None:
    seeded = await asyncio.to_thread(seed, database_url, 3000, 5)
    shop = await api.create_app("shop-owner", consume=["none"])  # the consumer acks alone
    api.apps["shop"] = shop
    # the seeded app `shop` has no API key we know: give its open messages to an app we hold
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    await conn.execute("UPDATE messages SET app = 'shop-owner', topic = $1 "
                       "WHERE message_id LIKE 'open-%'", f"{topic}.old")
    await conn.close()
    old_open = sorted(i for i in seeded.kept if i.startswith("open-"))

    stop = threading.Event()
    archive = tmp_path / "archive"
    request = RetentionRequest(database_url=database_url, older_than=CUTOFF_AGE,
                               archive=archive, pace=Pace.unpaced(100))

    def retention() -> RetentionResult:
        try:
            return run_retention(request)
        finally:
            stop.set()

    traffic = asyncio.create_task(_traffic(api, topic, stop, list(old_open)))
    result = await asyncio.to_thread(retention)
    ids, latencies = await traffic

    assert (result.messages, result.batches) == (3000, 30)
    remaining = await asyncio.to_thread(stored_ids, database_url)
    assert remaining == seeded.kept | set(ids)  # every new and every unfinished one stays
    assert sorted(r["message_id"] for r in archived(archive, "messages")) == sorted(seeded.doomed)
    # the old open messages finished during the run (done_at now): still there, done
    for old in old_open:
        response = await api.client.get(f"/v1/messages/{old}", headers=shop.headers)
        assert response.json()["state"] == "done", old
    assert len(ids) >= 10  # the request path answered throughout
    latencies.sort()
    print(f"requests during retention: {len(latencies)}, "
          f"p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    assert latencies[-1] < 5.0  # no request waited on a retention batch (a loaded machine)
