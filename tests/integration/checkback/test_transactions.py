"""Check-back of transactions of several messages, end to end: real API, real PostgreSQL, real
broker, a real HTTP check-back endpoint (the SDK's router and barrier, or a scripted server),
the worker's own tick. One call per transaction, never per message."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.kafka.records import header
from rms.store.database import open_engine
from rms_client.barrier import Barrier, BarrierClosed
from rms_client.checkback import (
    CheckRequest,
    CheckStatus,
    TransactionCheckRequest,
)
from rms_client.checkback_fastapi import checkback_router
from rms_client.producer import Draft, RmsProducer
from rms_client.signing import Verifier
from tests.integration.checkback.helpers import drive
from tests.integration.checkback.servers import CallbackServer, Reply, free_port, serving
from tests.support import Api, AppKeys, read_topic


@pytest.fixture
async def producer_db(database_url: str) -> AsyncIterator[AsyncEngine]:
    """The producer's own database (here the test's database; the barrier has its own
    table)."""
    engine = open_engine(database_url, pool_size=4)
    yield engine
    await engine.dispose()


class Endpoint:
    """The producer's check-back endpoint built from the SDK (router + barrier) on a real HTTP
    server; records the transaction checks it answered."""

    def __init__(self, barrier: Barrier) -> None:
        self.barrier = barrier
        self.seen: list[TransactionCheckRequest] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"

    async def resolve(self, check: TransactionCheckRequest) -> CheckStatus:
        self.seen.append(check)
        return await self.barrier.resolve_transaction(check)

    @contextlib.asynccontextmanager
    async def serving(self, secret: str) -> AsyncIterator[None]:
        async def resolve_message(check: CheckRequest) -> CheckStatus:
            raise AssertionError(f"message {check.message_id} was checked alone")

        app = FastAPI()
        app.include_router(checkback_router(resolve_message, secrets=[secret],
                                            resolve_transaction=self.resolve))
        async with serving(app, port=self.port):
            yield


@pytest.fixture
async def endpoint(producer_db: AsyncEngine) -> Endpoint:
    barrier = Barrier(producer_db, lock_timeout_seconds=5)
    await barrier.create_table()
    return Endpoint(barrier)


@contextlib.asynccontextmanager
async def shop(api: Api, endpoint: Endpoint, unique: str
               ) -> AsyncIterator[tuple[AppKeys, RmsProducer]]:
    """An app whose check-back endpoint (served while the block runs) is ``endpoint``."""
    keys = await api.create_app(f"shop-{unique}", prefixes=[endpoint.url])
    async with endpoint.serving(keys.signing_secret):
        yield keys, RmsProducer(client=api.client, api_key=keys.api_key,
                                default_check_url=endpoint.url + "rms/check")


def drafts(unique: str, topics: list[str]) -> list[Draft]:
    return [Draft(topic, {"n": n}, message_id=f"m{n}-{unique}") for n, topic in enumerate(topics)]


async def view(api: Api, app: AppKeys, transaction_id: str) -> dict[str, Any]:
    response = await api.client.get(f"/v1/transactions/{transaction_id}", headers=app.headers)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_crash_after_local_commit_is_confirmed_by_check_back_in_order(
        api: Api, endpoint: Endpoint, producer_db: AsyncEngine, worker_settings: Settings,
        unique: str) -> None:
    topics = [f"orders.{unique}", f"billing.{unique}", f"orders.{unique}"]
    async with shop(api, endpoint, unique) as (keys, rms), \
            checkback_worker(worker_settings) as worker:
        tx = await rms.prepare_transaction(drafts(unique, topics),
                                           transaction_id=f"tx-{unique}",
                                           check_after_seconds=0.05)
        async with producer_db.begin() as conn:  # the local transaction commits...
            await endpoint.barrier.mark_committed(conn, tx.transaction_id)
        # ... and the producer dies before confirming

        async def settled() -> bool:
            return bool((await view(api, keys, tx.transaction_id))["state"] != "pending")
        await drive(worker, settled)

    found = await view(api, keys, tx.transaction_id)
    assert found["state"] == "confirmed" and found["check_count"] == 1
    assert [m["state"] for m in found["messages"]] == ["sent"] * 3
    [check] = endpoint.seen  # one call for the three messages
    assert check.transaction_id == tx.transaction_id and check.app == keys.name
    assert check.message_ids == [f"m0-{unique}", f"m1-{unique}", f"m2-{unique}"]
    assert check.check_count == 1
    servers = api.settings.kafka_bootstrap_servers
    orders = await read_topic(servers, topics[0], expect=2, settle=0.3)
    billing = await read_topic(servers, topics[1], expect=1, settle=0.3)
    assert [header(list(r.headers), "rms-message-id") for r in orders] == [
        f"m0-{unique}", f"m2-{unique}"]
    assert len(billing) == 1
    assert orders[0].timestamp <= billing[0].timestamp <= orders[1].timestamp
    events = (await api.client.get(f"/v1/messages/m1-{unique}/events",
                                   headers=keys.headers)).json()["events"]
    assert [e["event"] for e in events] == ["prepared", "checked", "confirmed", "published"]
    assert events[1]["detail"] == {"attempt": 1, "outcome": "committed",
                                   "transaction_id": tx.transaction_id}
    assert events[2]["detail"] == {"by": "check-back", "transaction_id": tx.transaction_id}


async def test_crash_before_local_commit_is_rolled_back_and_nothing_published(
        api: Api, endpoint: Endpoint, producer_db: AsyncEngine, worker_settings: Settings,
        unique: str) -> None:
    topic = f"orders.{unique}"
    async with shop(api, endpoint, unique) as (keys, rms), \
            checkback_worker(worker_settings) as worker:
        tx = await rms.prepare_transaction(drafts(unique, [topic, topic]),
                                           check_after_seconds=0.05)
        # the producer dies before its local transaction ran

        async def settled() -> bool:
            return bool((await view(api, keys, tx.transaction_id))["state"] != "pending")
        await drive(worker, settled)

    found = await view(api, keys, tx.transaction_id)
    assert found["state"] == "cancelled"
    assert [m["state"] for m in found["messages"]] == ["deleted", "deleted"]
    assert len(endpoint.seen) == 1
    with pytest.raises(BarrierClosed):  # the late local transaction cannot commit any more
        async with producer_db.begin() as conn:
            await endpoint.barrier.mark_committed(conn, tx.transaction_id)
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=1.5) == []


async def test_unknown_until_exhausted_flags_all_dead_then_admin_confirms(
        api: Api, server: CallbackServer, worker_settings: Settings, unique: str) -> None:
    keys = await api.create_app(f"shop-{unique}", prefixes=[server.url])
    topic = f"orders.{unique}"
    body = {"transaction_id": f"tx-{unique}", "check_url": server.url + "check",
            "check_after_seconds": 0.05, "max_checks": 2,
            "messages": [{"topic": topic, "payload": {"n": n}, "message_id": f"m{n}-{unique}"}
                         for n in range(3)]}
    assert (await api.post(keys, "/v1/transactions", json=body)).status_code == 201

    async def unknown(_call: Any) -> Reply:
        return Reply.answer("unknown")
    server.behaviour = unknown

    async with checkback_worker(worker_settings) as worker:
        async def dead() -> bool:
            return bool((await view(api, keys, f"tx-{unique}"))["dead"])
        await drive(worker, dead)
        await worker.tick()  # a dead transaction is not asked again

    found = await view(api, keys, f"tx-{unique}")
    assert (found["state"], found["dead_reason"], found["check_count"]) == (
        "pending", "check-exhausted", 2)
    assert all(m["dead"] and m["dead_reason"] == "check-exhausted" for m in found["messages"])
    # asked twice for the transaction, never per message (a call the loaded machine let time
    # out before the server read it counts as an unknown answer too)
    for member in found["messages"]:
        events = (await api.client.get(f"/v1/messages/{member['message_id']}/events",
                                       headers=keys.headers)).json()["events"]
        assert [e["detail"]["attempt"] for e in events if e["event"] == "checked"] == [1, 2]
    assert 1 <= len(server.calls) <= 2
    for call in server.calls:
        count = call.check_count
        assert call.json == {"transaction_id": f"tx-{unique}", "app": keys.name,
                             "message_ids": [f"m{n}-{unique}" for n in range(3)],
                             "created_at": call.json["created_at"], "check_count": count}
        assert call.headers["webhook-id"] == f"txn_tx-{unique}_{count}"
        Verifier([keys.signing_secret]).verify(call.headers, call.body)

    confirmed = await api.client.post(f"/v1/admin/transactions/tx-{unique}/confirm",
                                      headers=api.admin)
    assert confirmed.status_code == 200, confirmed.text
    assert not confirmed.json()["dead"]
    assert all(not m["dead"] and m["state"] == "sent" for m in confirmed.json()["messages"])
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3,
                               settle=0.3)
    assert [header(list(r.headers), "rms-message-id") for r in records] == [
        f"m{n}-{unique}" for n in range(3)]


async def test_a_producer_confirm_after_the_claim_wins_and_the_answer_is_stale(
        api: Api, server: CallbackServer, worker_settings: Settings, unique: str) -> None:
    keys = await api.create_app(f"shop-{unique}", prefixes=[server.url])
    topic = f"orders.{unique}"
    body = {"transaction_id": f"tx-{unique}", "check_url": server.url + "check",
            "check_after_seconds": 0.05,
            "messages": [{"topic": topic, "payload": {"n": n}} for n in range(2)]}
    assert (await api.post(keys, "/v1/transactions", json=body)).status_code == 201

    async def cancel_meanwhile(_call: Any) -> Reply:
        # the producer comes back and cancels while RMS is asking it
        answer = await api.post(keys, f"/v1/transactions/tx-{unique}/cancel")
        assert answer.status_code == 200
        return Reply.answer("committed")
    server.behaviour = cancel_meanwhile

    async with checkback_worker(worker_settings) as worker:
        async def asked() -> bool:
            return len(server.calls) >= 1
        await drive(worker, asked)

    found = await view(api, keys, f"tx-{unique}")
    assert found["state"] == "cancelled"  # the producer's cancel stands
    assert [m["state"] for m in found["messages"]] == ["deleted", "deleted"]
    member = found["messages"][0]["message_id"]
    events = (await api.client.get(f"/v1/messages/{member}/events",
                                   headers=keys.headers)).json()["events"]
    checked = [e for e in events if e["event"] == "checked"]
    assert checked and checked[0]["detail"]["stale"] is True
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=1.5) == []


async def test_two_workers_never_ask_about_one_transaction_in_the_same_round(
        api: Api, server: CallbackServer, worker_settings: Settings, unique: str) -> None:
    keys = await api.create_app(f"shop-{unique}", prefixes=[server.url])
    topic = f"orders.{unique}"
    ids = [f"tx{n}-{unique}" for n in range(20)]
    for transaction_id in ids:
        body = {"transaction_id": transaction_id, "check_url": server.url + "check",
                "check_after_seconds": 0.05,
                "messages": [{"topic": topic, "payload": {"n": n}} for n in range(2)]}
        assert (await api.post(keys, "/v1/transactions", json=body)).status_code == 201

    async def committed(_call: Any) -> Reply:
        return Reply.answer("committed", delay=0.05)
    server.behaviour = committed
    patient = worker_settings.model_copy(update={"callback_timeout_seconds": 10.0,
                                                 "worker_batch_size": 4})

    async with checkback_worker(patient) as first, checkback_worker(patient) as second:
        async def all_confirmed() -> bool:
            views = [await view(api, keys, t) for t in ids]
            return all(v["state"] == "confirmed" for v in views)

        await asyncio.sleep(0.1)  # all due
        await asyncio.gather(first.tick(), second.tick())
        await drive(first, all_confirmed)

    asked = Counter(call.json["transaction_id"] for call in server.calls)
    assert asked == dict.fromkeys(ids, 1)
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=40,
                               settle=0.3)
    assert len(records) == 40
