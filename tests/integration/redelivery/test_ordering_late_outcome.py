"""The head-of-line rule reads what the broker took. A broker that stalls longer than a claim's
lease lets a second worker claim the ordered head again (delivery 2) while delivery 1 is still
in flight; delivery 1's outcome then arrives for a count that moved on and is written as
history only. When both publishes time out, the head counts one delivery the broker never
took: the messages of its key confirmed after it must still wait for it (its retry), never go
first. A real broker behind a TCP proxy that holds every byte, two recovery workers, real
PostgreSQL. The same stalled broker also times out a producer's confirm, which is answered
with what happened."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.devstack.embedded import free_port
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.kafka.records import header
from rms.worker import worker_context
from tests.integration.redelivery.helpers import SqlHelper, events, message
from tests.support import CHECK_PREFIX, Api, AppKeys, create_topic, eventually, read_topic
from tests.system.faults.proxy import FaultProxy, Toxics

LEASE = 1.0


@pytest.fixture(scope="module")
def stalling_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    broker = EmbeddedKafka(tmp_path_factory.mktemp("stalling-kafka"), auto_create_topics=False)
    broker.nodes[0].advertised_port = free_port()  # every client connection passes the proxy
    yield broker
    broker.stop()


@pytest.fixture
async def proxy(stalling_broker: EmbeddedKafka) -> AsyncIterator[FaultProxy]:
    node = stalling_broker.nodes[0]
    assert node.advertised_port is not None
    stalls = FaultProxy(upstream_port=node.port, port=node.advertised_port)
    await stalls.start()
    if not node.running():
        await asyncio.to_thread(stalling_broker.start)
    yield stalls
    await stalls.stop()


@pytest.fixture
def settings(settings: Settings, proxy: FaultProxy) -> Settings:
    return settings.model_copy(update={
        "kafka_bootstrap_servers": proxy.address, "worker_lease_seconds": LEASE,
        "kafka_publish_timeout_seconds": 2.0, "publish_retry_seconds": 120.0})


async def _confirmed(api: Api, app: AppKeys, topic: str) -> str:
    message_id = await api.prepared_id(app, topic, key="account-1")
    response = await api.post(app, f"/v1/messages/{message_id}/confirm")
    assert response.status_code == 200, response.text
    return message_id


async def _attempts(api: Api, message_id: str) -> list[str]:
    return [e["event"] for e in await events(api, message_id)
            if e["event"] in ("published", "publish-failed")]


@pytest.mark.timeout(180)
async def test_a_head_whose_publishes_all_timed_out_keeps_its_key_held(
        api: Api, proxy: FaultProxy, topic: str, sql: SqlHelper) -> None:
    await create_topic(api.settings.kafka_bootstrap_servers, topic)
    orders = await api.create_app("orders", [topic], [topic], [CHECK_PREFIX], ordered=[topic])
    head = await _confirmed(api, orders, topic)

    async def counted(deliveries: int) -> bool:
        return bool((await message(api, head))["delivery_count"] == deliveries)

    async with (worker_context(api.settings, "recovery-worker") as one,
                worker_context(api.settings, "recovery-worker") as two):
        first, second = from_context(one), from_context(two)
        proxy.toxics = Toxics(latency=60.0)  # the broker stalls: nothing gets through
        stalled = [asyncio.create_task(first.tick())]
        await eventually(lambda: counted(1))  # delivery 1 claimed, its publish in flight
        await asyncio.sleep(LEASE + 0.3)  # its claim's lease (and the key's) ran out
        stalled.append(asyncio.create_task(second.tick()))
        await eventually(lambda: counted(2))  # claimed again: delivery 2 in flight as well
        await asyncio.gather(*stalled)  # both publishes time out
        proxy.heal()
        proxy.reset_all()

        stored = await message(api, head)
        assert await _attempts(api, head) == ["publish-failed", "publish-failed"]
        # one delivery still counted (delivery 1's outcome came after the count moved on),
        # none taken by the broker, waiting for the retry
        assert stored["delivery_count"] == 1 and stored["publish_failure"] is not None

        behind = await _confirmed(api, orders, topic)  # due at once, behind the head
        await first.tick()
        await second.tick()

        assert await _attempts(api, behind) == []  # still waiting behind the head
        assert (await message(api, behind))["delivery_count"] == 0
        stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
        assert [(k["message_id"], k["reason"], k["waiting"]) for k in stats["blocked_keys"]] \
            == [(head, "publish-failed", 1)]

        await sql.make_due([head])  # its retry time came
        await first.tick()  # the head alone, then (the key clear) the message behind it
        assert [e["event"] for e in await events(api, behind)] \
            == ["prepared", "confirmed", "published"]  # no delivery withdrawn on a retry

    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2,
                               settle=1.0)
    assert [header(list(r.headers), "rms-message-id") for r in records] == [head, behind]


@pytest.mark.timeout(120)
async def test_a_confirm_whose_publish_times_out_answers_the_outcome(
        api: Api, proxy: FaultProxy, topic: str) -> None:
    """The neighbour on the request path: a confirm whose publish the stalled broker never
    answers is answered with its delivery given back and the failure named."""
    await create_topic(api.settings.kafka_bootstrap_servers, topic)
    orders = await api.create_app("orders", [topic], [topic], [CHECK_PREFIX])
    message_id = await api.prepared_id(orders, topic)
    proxy.toxics = Toxics(latency=60.0)
    try:
        response = await api.post(orders, f"/v1/messages/{message_id}/confirm")
    finally:
        proxy.heal()
        proxy.reset_all()

    assert response.status_code == 200, response.text
    answered = response.json()
    assert answered["state"] == "sent" and answered["delivery_count"] == 0, answered
    assert answered["publish_failure"] in ("timeout", "broker-unavailable"), answered
    stored = await message(api, message_id)
    assert [stored[name] for name in ("delivery_count", "next_delivery_at", "publish_failure")] \
        == [answered[name] for name in ("delivery_count", "next_delivery_at", "publish_failure")]
