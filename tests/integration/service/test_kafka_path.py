"""Confirm -> record on Kafka (design section 6); acks by HTTP and by the ack topic."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaProducer

from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.kafka.records import header
from rms_client.ack_records import signed_ack_headers
from tests.conftest import ADMIN_TOKEN
from tests.support import Api, eventually, produce, read_topic


async def test_record_has_key_value_and_headers(api: Api, topic: str) -> None:
    app = await api.create_app("orders")
    message_id = await api.prepared_id(app, topic, message_id="order-7-paid",
                                       payload={"order": 7, "total": 12.5},
                                       headers={"trace": "abc"})
    created_at = (await api.client.get(f"/v1/messages/{message_id}",
                                       headers=app.headers)).json()["created_at"]
    await api.post(app, f"/v1/messages/{message_id}/confirm")
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                                 settle=0.5)
    assert record.key == b"order-7-paid"  # no key given: the message id
    assert orjson.loads(record.value) == {"order": 7, "total": 12.5}
    headers = list(record.headers)
    assert header(headers, "rms-message-id") == "order-7-paid"
    assert header(headers, "rms-app") == "orders"
    assert header(headers, "rms-delivery") == "1"
    assert header(headers, "rms-created-at") == created_at
    assert header(headers, "trace") == "abc"


async def test_explicit_key_is_the_record_key(api: Api, topic: str) -> None:
    app = await api.create_app("orders")
    response = await api.post(app, "/v1/messages/send",
                              json={"topic": topic, "key": "customer-9", "payload": [1, 2],
                                    "check_url": "http://127.0.0.1:1/c"})
    assert response.status_code == 201
    assert response.json()["state"] == "sent"
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert record.key == b"customer-9"
    assert orjson.loads(record.value) == [1, 2]


async def test_ack_over_http_and_duplicates(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await api.prepared_id(producer, topic)
    await api.post(producer, f"/v1/messages/{message_id}/confirm")
    for _ in range(3):
        acked = await api.post(consumer, f"/v1/messages/{message_id}/ack")
        assert acked.status_code == 200
        assert acked.json()["state"] == "done"
    events = (await api.client.get(f"/v1/messages/{message_id}/events",
                                   headers=producer.headers)).json()["events"]
    assert [e["event"] for e in events].count("acked") == 1


async def test_ack_topic_marks_done_and_ignores_strangers(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    audit = await api.create_app("audit", produce=["none"], consume=["billing.*"])
    ids = [await api.prepared_id(producer, topic) for _ in range(3)]
    for message_id in ids:
        await api.post(producer, f"/v1/messages/{message_id}/confirm")
    servers, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    await produce(servers, acks, [await api.ack_body(producer, ids[0], "points")] * 2,
                  points.signing_secret)  # a duplicate is harmless
    await produce(servers, acks, [await api.ack_body(producer, ids[1], "audit")],
                  audit.signing_secret)  # may not consume orders.*: ignored
    await produce(servers, acks, [await api.ack_body(producer, ids[2], "nobody")],
                  points.signing_secret)  # unknown app: ignored
    await produce(servers, acks, [{"not": "an ack"}])

    async def state(message_id: str) -> str:
        response = await api.client.get(f"/v1/messages/{message_id}", headers=producer.headers)
        return str(response.json()["state"])

    await eventually(lambda: _is(state(ids[0]), "done"), timeout=20)
    await produce(servers, acks, [await api.ack_body(producer, ids[1], "points")],
                  points.signing_secret)
    await eventually(lambda: _is(state(ids[1]), "done"), timeout=20)
    assert await state(ids[2]) == "sent"  # the stranger's ack was refused


def _rejected(reason: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("rms_acks_rejected_total", {"reason": reason}) or 0.0


async def test_forged_acks_change_nothing_and_are_counted(api: Api, topic: str) -> None:
    """Writing to the ack topic is not enough: an ack must be signed by the app it names."""
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    other = await api.create_app("other", produce=["none"], consume=["none"])
    ids = [await api.prepared_id(producer, topic) for _ in range(4)]
    for message_id in ids:
        await api.post(producer, f"/v1/messages/{message_id}/confirm")
    servers, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    before = {r: _rejected(r) for r in ("unsigned", "bad-signature")}

    await produce(servers, acks, [await api.ack_body(producer, ids[0], "points")])  # unsigned
    await produce(servers, acks, [await api.ack_body(producer, ids[1], "points")],
                  other.signing_secret)  # signed by another app
    await produce(servers, acks, [await api.ack_body(producer, ids[2], "points")],
                  "whsec_" + "QUJD" * 8)  # a made-up secret
    forged = AIOKafkaProducer(bootstrap_servers=servers, enable_idempotence=False)
    await forged.start()
    try:  # a valid signature of another value: the value was changed after signing
        original = orjson.dumps(await api.ack_body(producer, ids[0], "points"))
        tampered = orjson.dumps(await api.ack_body(producer, ids[3], "points"))
        await forged.send_and_wait(acks, tampered,
                                   headers=signed_ack_headers([points.signing_secret], original))
    finally:
        await forged.stop()

    async def counted() -> bool:
        return (_rejected("unsigned") >= before["unsigned"] + 1
                and _rejected("bad-signature") >= before["bad-signature"] + 3)

    await eventually(counted, timeout=20)
    for message_id in ids:
        response = await api.client.get(f"/v1/messages/{message_id}", headers=producer.headers)
        assert response.json()["state"] == "sent"


async def test_acks_signed_with_either_secret_during_a_rotation_overlap(api: Api,
                                                                        topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    ids = [await api.prepared_id(producer, topic) for _ in range(2)]
    for message_id in ids:
        await api.post(producer, f"/v1/messages/{message_id}/confirm")
    rotated = await api.client.post("/v1/admin/apps/points/rotate-signing-secret",
                                    headers=api.admin, json={"overlap_seconds": 600})
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["signing_secret"]
    servers, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    await produce(servers, acks, [await api.ack_body(producer, ids[0], "points")],
                  points.signing_secret)
    await produce(servers, acks, [await api.ack_body(producer, ids[1], "points")], new_secret)

    async def both_done() -> bool:
        states = [(await api.client.get(f"/v1/messages/{i}", headers=producer.headers))
                  .json()["state"] for i in ids]
        return states == ["done", "done"]

    await eventually(both_done, timeout=20)


async def _is(value: Awaitable[str], expected: str) -> bool:
    return (await value) == expected


@pytest.fixture
async def own_broker(tmp_path: Path) -> AsyncIterator[EmbeddedKafka]:
    broker = EmbeddedKafka(tmp_path / "kafka")
    broker.start()
    yield broker
    broker.kill()


async def test_publish_failure_still_confirms(settings: Settings, own_broker: EmbeddedKafka,
                                              topic: str) -> None:
    """Broker gone at confirm: 200, durably sent, delivery number given back, due soon,
    failure counted as broker-unavailable (not as a missing topic)."""
    from prometheus_client import REGISTRY

    from message_service.app import create_app

    local = settings.model_copy(update={"kafka_bootstrap_servers": own_broker.bootstrap_servers,
                                        "kafka_publish_timeout_seconds": 1.0,
                                        "ack_consumer_enabled": False})
    app = create_app(local)
    transport = httpx.ASGITransport(app=app)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client):
            api = Api(client, ADMIN_TOKEN, local)
            orders = await api.create_app("orders")
            message_id = await api.prepared_id(orders, topic)
            own_broker.kill()
            unavailable = {"reason": "broker-unavailable"}
            before = REGISTRY.get_sample_value("rms_publish_failures_total", unavailable) or 0.0
            response = await api.post(orders, f"/v1/messages/{message_id}/confirm")
            assert response.status_code == 200
            assert response.json()["state"] == "sent"
            after = REGISTRY.get_sample_value("rms_publish_failures_total", unavailable) or 0.0
            assert after == before + 1
            stored = (await client.get(f"/v1/messages/{message_id}",
                                       headers=orders.headers)).json()
            assert stored["state"] == "sent"
            assert stored["delivery_count"] == 0
            assert stored["next_delivery_at"] is not None
            events = (await client.get(f"/v1/messages/{message_id}/events",
                                       headers=orders.headers)).json()["events"]
            assert [e["event"] for e in events] == ["prepared", "confirmed", "publish-failed"]

