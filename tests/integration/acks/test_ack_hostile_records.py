"""No record can stop the ack topic, and none can replay an ack onto another instance: hostile
records through the real broker into the real ack consumer and PostgreSQL, each followed by a
valid ack that must be applied while the consumer's loop never fails; and the ack statement
itself refuses an instance that changed between the lookup and the write."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from datetime import datetime

import orjson
from aiokafka import AIOKafkaProducer
from prometheus_client import REGISTRY
from sqlalchemy import text

from rms.store.apps import AppStore
from rms.store.database import create_engine
from rms.store.messages import MessageStore
from rms.store.subscriptions.acks import AckItem, AckTarget
from rms.store.subscriptions.store import SubscriptionStore
from rms.usecases.acks import Acks
from rms_client.ack_records import AckRecord, signed_ack_headers
from rms_client.signing import signed_headers
from tests.support import Api, AppKeys, eventually, produce, write_records

Headers = list[tuple[str, bytes | None]]


def _sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _loop_failures() -> float:
    return sum(_sample("rms_loop_failures_total", {"component": component, "cause": cause})
               for component in ("ack-consumer", "ack-batch")
               for cause in ("database", "kafka", "other"))


async def _sent(api: Api, producer: AppKeys, topic: str) -> str:
    message_id = await api.prepared_id(producer, topic)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


async def _state(api: Api, owner: AppKeys, message_id: str) -> str:
    response = await api.client.get(f"/v1/messages/{message_id}", headers=owner.headers)
    return str(response.json()["state"])


async def _done(api: Api, owner: AppKeys, message_id: str) -> bool:
    return await _state(api, owner, message_id) == "done"


def _old_form(secret: str, message_id: str, stamp: int) -> tuple[bytes, Headers]:
    """An ack record without ``created_at``, signed at ``stamp``."""
    value = orjson.dumps({"message_id": message_id, "consumer": "points"})
    signed = signed_headers([secret], f"ack_{time.monotonic_ns()}", value, stamp)
    return value, [(name, text_.encode()) for name, text_ in signed.items()]


async def test_a_timestamp_of_400_digits_stops_nothing(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    first, second = await _sent(api, producer, topic), await _sent(api, producer, topic)
    failures = _loop_failures()
    value, signed = _old_form(points.signing_secret, first, int(time.time()))
    bootstrap, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    await write_records(bootstrap, acks, [(value, [("webhook-timestamp", b"9" * 400), *signed])])
    await produce(bootstrap, acks, [await api.ack_body(producer, second, "points")],
                  points.signing_secret)
    await eventually(lambda: _done(api, producer, second), timeout=20)
    assert await _state(api, producer, first) == "sent"
    assert _loop_failures() == failures


async def test_a_replayed_record_with_a_forged_later_timestamp_in_front_finishes_nothing(
        api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    newer, marker = await _sent(api, producer, topic), await _sent(api, producer, topic)
    captured = _old_form(points.signing_secret, newer, int(time.time()) - 3600)  # signed earlier
    forged_stamp = str(int(time.time()) + 60).encode()
    replayed: Headers = [("webhook-timestamp", forged_stamp), *captured[1]]
    bootstrap, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    before = _sample("rms_acks_rejected_total", {"reason": "duplicate-header"})
    await write_records(bootstrap, acks, [(captured[0], replayed)])
    await produce(bootstrap, acks, [await api.ack_body(producer, marker, "points")],
                  points.signing_secret)
    await eventually(lambda: _done(api, producer, marker), timeout=20)
    assert await _state(api, producer, newer) == "sent"
    assert _sample("rms_acks_rejected_total", {"reason": "duplicate-header"}) == before + 1


def _hostile(rng: random.Random, message_id: str) -> tuple[bytes | None, Headers]:
    """One generated record: any header names (webhook ones among them, repeated), values of
    any length or none, a value that is no JSON, JSON with huge numbers, or no value."""
    names = ["webhook-id", "webhook-timestamp", "webhook-signature", "Webhook-Timestamp",
             "rms-message-id", "traceparent", "", "x" * 300, "ключ", "\u0000"]
    values: list[bytes | None] = [None, b"", b"9" * rng.choice([20, 400, 5000]), b"\xff\xfe",
                                  b"v1,AAAA", b"-1", b"1e400", rng.randbytes(rng.randint(0, 200))]
    headers: Headers = [(rng.choice(names), rng.choice(values)) for _ in range(rng.randint(0, 8))]
    bodies: list[bytes | None] = [
        None, b"", b"{", b"null", b"[]", b"1" * 5000, rng.randbytes(rng.randint(1, 300)),
        b'{"message_id": 1' + b"0" * 400 + b', "consumer": "points"}',
        orjson.dumps({"message_id": message_id, "consumer": "points",
                      "created_at": rng.choice(["9" * 400, "", "2026-11-26T08:00:00Z", None])}),
        orjson.dumps({"message_id": "m" * rng.choice([1, 128, 129, 10000]),
                      "consumer": rng.choice(["points", "p" * 64, "", "Points"])}),
    ]
    return rng.choice(bodies), headers


async def test_thousands_of_generated_records_then_a_valid_ack(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    target, marker = await _sent(api, producer, topic), await _sent(api, producer, topic)
    rng = random.Random(32)
    records = [_hostile(rng, target) for _ in range(3000)]
    failures = _loop_failures()
    writer = AIOKafkaProducer(bootstrap_servers=api.settings.kafka_bootstrap_servers,
                              enable_idempotence=False, linger_ms=5, compression_type="gzip")
    await writer.start()
    try:
        sends = [await writer.send(api.settings.ack_topic, value, key=b"k", headers=headers)
                 for value, headers in records]
        for sent in sends:
            await sent
    finally:
        await writer.stop()
    await produce(api.settings.kafka_bootstrap_servers, api.settings.ack_topic,
                  [await api.ack_body(producer, marker, "points")], points.signing_secret)
    await eventually(lambda: _done(api, producer, marker), timeout=60)
    assert await _state(api, producer, target) == "sent"  # nothing generated was signed
    assert _loop_failures() == failures


class _ReusedBetween(SubscriptionStore):
    """A store whose ids are freed and used again right after the ack lookup read them: the
    stored rows then hold other instances (another creation time) of the same ids."""

    async def ack_targets(self, message_ids: Sequence[str]) -> dict[str, AckTarget]:
        found = await super().ack_targets(message_ids)
        async with self._engine.begin() as conn:
            await conn.execute(text("UPDATE messages SET created_at = created_at + "
                                    "interval '1 second' WHERE message_id = ANY(:ids)"),
                               {"ids": list(message_ids)})
        return found


async def test_an_instance_replaced_between_lookup_and_write_is_not_acknowledged(
        api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await _sent(api, producer, topic)
    value = orjson.dumps(await api.ack_body(producer, message_id, "points"))
    record = AckRecord.of(value, list(signed_ack_headers([points.signing_secret], value)))
    engine = create_engine(api.settings)
    try:
        racing = Acks(api.settings, MessageStore(engine), AppStore(engine), _ReusedBetween(engine))
        assert await racing.apply_records([record]) == 0
        assert await _state(api, producer, message_id) == "sent"
        current = await SubscriptionStore(engine).ack_targets([message_id])
        stored: datetime = current[message_id].created_at
        done = await SubscriptionStore(engine).ack_many(
            [AckItem(message_id, "points", "ack-topic", stored)])
        assert done == [message_id]  # the statement applies to the instance it names
    finally:
        await engine.dispose()
