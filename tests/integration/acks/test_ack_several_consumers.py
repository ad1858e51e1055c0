"""Several consumers acking over the ack topic (design sections 3 and 6): signed records on a
real broker, read by RMS's ack consumer into real PostgreSQL. Each consumer's record counts for
that consumer alone; two consumers' records of one message in one batch both count; a record
by an app that is not a subscriber is recorded as ``ack-ignored``."""

from __future__ import annotations

from typing import Any

import orjson

from rms.store.apps import AppStore
from rms.store.database import create_engine
from rms.store.messages import MessageStore
from rms.store.subscriptions.store import SubscriptionStore
from rms.usecases.acks import Acks
from rms_client.ack_records import AckRecord, ack_value, signed_ack_headers
from tests.support import Api, AppKeys, eventually, write_records


async def _sent(api: Api, producer: AppKeys, topic: str) -> str:
    message_id = await api.prepared_id(producer, topic)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


async def _stored(api: Api, message_id: str) -> dict[str, Any]:
    response = await api.client.get(f"/v1/admin/messages/{message_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def _events(api: Api, message_id: str) -> list[tuple[str, dict[str, Any]]]:
    response = await api.client.get(f"/v1/admin/messages/{message_id}/events",
                                    headers=api.admin)
    return [(e["event"], e["detail"]) for e in response.json()["events"]
            if e["event"] in {"acked", "ack-ignored"}]


async def _ack_records(api: Api, message_id: str, *consumers: AppKeys) -> None:
    created_at = (await _stored(api, message_id))["created_at"]
    records = []
    for consumer in consumers:
        value = ack_value(message_id, consumer.name, created_at)
        records.append((value, signed_ack_headers([consumer.signing_secret], value)))
    await write_records(api.settings.kafka_bootstrap_servers, api.settings.ack_topic, records)


async def _acked_by(api: Api, message_id: str, count: int) -> dict[str, Any] | None:
    found = await _stored(api, message_id)
    return found if len(found["acks"] or {}) >= count else None


async def test_each_consumers_record_counts_for_that_consumer_alone(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    invoices = await api.create_app("invoices", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)

    await _ack_records(api, message_id, points)
    one = await eventually(lambda: _acked_by(api, message_id, 1), timeout=20)
    assert one["state"] == "sent" and set(one["acks"]) == {"points"}
    assert one["acks"]["points"]["via"] == "ack-topic"

    await _ack_records(api, message_id, points, invoices)  # a repeat, then the last one owed
    both = await eventually(lambda: _acked_by(api, message_id, 2), timeout=20)
    assert both["state"] == "done"
    assert await _events(api, message_id) == [("acked", {"via": "ack-topic", "done": False}),
                                              ("acked", {"via": "ack-topic", "done": True})]


async def test_two_consumers_records_of_one_message_in_one_batch_both_count(
        api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    invoices = await api.create_app("invoices", produce=["none"], consume=[topic])
    first, second = await _sent(api, producer, topic), await _sent(api, producer, topic)
    created = {m: (await _stored(api, m))["created_at"] for m in (first, second)}
    batch = [_record(m, c, created[m]) for m in (first, second) for c in (points, invoices)]
    engine = create_engine(api.settings)
    try:  # the ack consumer's use case, given the batch as one poll would hand it over
        acks = Acks(api.settings, MessageStore(engine), AppStore(engine), SubscriptionStore(engine))
        assert await acks.apply_records(batch) == 4
        assert await acks.apply_records(batch) == 0  # each consumer's ack is recorded once
    finally:
        await engine.dispose()
    for message_id in (first, second):
        done = await _stored(api, message_id)
        assert done["state"] == "done" and set(done["acks"]) == {"points", "invoices"}


def _record(message_id: str, consumer: AppKeys, created_at: str) -> AckRecord:
    value = ack_value(message_id, consumer.name, created_at)
    return AckRecord.of(value, list(signed_ack_headers([consumer.signing_secret], value)))


async def test_a_record_by_an_app_that_is_not_a_subscriber_finishes_nothing(
        api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)
    late = await api.create_app("shipping", produce=["none"], consume=[topic])

    await _ack_records(api, message_id, late)
    await eventually(lambda: _events(api, message_id), timeout=20)
    assert await _events(api, message_id) == [
        ("ack-ignored", {"via": "ack-topic", "reason": "not-a-subscriber"})]
    stored = await _stored(api, message_id)
    assert (stored["state"], stored["acks"]) == ("sent", None)
    await _ack_records(api, message_id, points)
    assert (await eventually(lambda: _acked_by(api, message_id, 1), timeout=20))["state"] == (
        "done")
    assert orjson.dumps(stored["subscribers"]) == orjson.dumps(
        [{"app": "points", "acked_at": None, "via": None, "exhausted": False}])
