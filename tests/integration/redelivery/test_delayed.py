"""Delayed delivery against the real database and broker: a confirmed delayed message is
``sent`` with nothing published until its ``deliver_after`` (database clock), then the recovery
worker publishes it as its first delivery; never before its time, promptly after it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.kafka.records import header
from rms.usecases.redelivery import RedeliveryWorker
from rms.worker import worker_context
from tests.integration.redelivery.helpers import SqlHelper, events, message, tick_until
from tests.support import CHECK_PREFIX, Api, AppKeys, read_topic


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def _producer(api: Api) -> AppKeys:
    return api.apps.get("orders") or await api.create_app("orders", consume=["none"])


async def _ordered_producer(api: Api, name: str, topic: str) -> AppKeys:
    """An app producing only ``topic``, ordered, whose check-backs may go nowhere."""
    return await api.create_app(name, [topic], ["none"], [CHECK_PREFIX, "http://127.0.0.1:1/"],
                                ordered=[topic])


async def _published_at(api: Api, message_id: str) -> list[datetime]:
    return [_at(e["at"]) for e in await events(api, message_id) if e["event"] == "published"]


async def test_confirmed_delayed_message_is_published_at_its_time_not_before(
        api: Api, worker: RedeliveryWorker, topic: str) -> None:
    producer = await _producer(api)
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await api.prepared_id(producer, topic, delay_seconds=2.0)
    prepared = await message(api, message_id)
    deliver_after = _at(prepared["deliver_after"])
    assert deliver_after - _at(prepared["created_at"]) == timedelta(seconds=2)

    confirmed = (await api.post(producer, f"/v1/messages/{message_id}/confirm")).json()
    assert (confirmed["state"], confirmed["delivery_count"]) == ("sent", 0)
    assert _at(confirmed["next_delivery_at"]) == deliver_after
    assert (await worker.tick()).claimed == 0  # not due yet
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=0.5) == []

    async def published() -> bool:
        return bool(await _published_at(api, message_id))

    await tick_until(worker, published, interval=0.05)
    (at,) = await _published_at(api, message_id)
    assert deliver_after <= at < deliver_after + timedelta(seconds=5)
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                                 settle=0.3)
    assert header(list(record.headers), "rms-delivery") == "1"
    stored = await message(api, message_id)
    assert (stored["delivery_count"], stored["dead"]) == (1, False)
    assert _at(stored["next_delivery_at"]) > at  # the ack deadline, from the publish
    assert (await api.post(consumer, f"/v1/messages/{message_id}/ack")).json()["state"] == "done"
    assert [e["event"] for e in await events(api, message_id)] == [
        "prepared", "confirmed", "published", "acked"]


async def test_a_tick_waits_for_a_delivery_due_before_the_next_one(
        api: Api, settings: Settings, topic: str) -> None:
    """With a 2 s interval, one tick that starts 1 s before a delayed message's time publishes
    it when due (the next tick would have been a second late)."""
    producer = await _producer(api)
    message_id = await api.prepared_id(producer, topic, delay_seconds=1.0)
    await api.post(producer, f"/v1/messages/{message_id}/confirm")
    slow = settings.model_copy(update={"worker_interval_seconds": 2.0})
    async with worker_context(slow, "recovery-worker") as context:
        report = await from_context(context).tick()
    assert (report.claimed, report.published) == (1, 1)
    (at,) = await _published_at(api, message_id)
    deliver_after = _at((await message(api, message_id))["deliver_after"])
    assert deliver_after <= at < deliver_after + timedelta(seconds=1.5)


async def test_one_shot_send_with_an_absolute_time(
        api: Api, worker: RedeliveryWorker, topic: str) -> None:
    producer = await _producer(api)
    when = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    response = await api.post(producer, "/v1/messages/send",
                              json={"topic": topic, "payload": {"n": 1}, "deliver_after": when,
                                    "check_url": "http://127.0.0.1:1/c"})
    assert response.status_code == 201, response.text
    sent = response.json()
    assert (sent["state"], sent["delivery_count"]) == ("sent", 0)
    assert _at(sent["deliver_after"]) == _at(when)

    async def published() -> bool:
        return bool(await _published_at(api, sent["message_id"]))

    await tick_until(worker, published)
    (at,) = await _published_at(api, sent["message_id"])
    assert at >= _at(when)
    assert len(await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                                settle=0.3)) == 1


async def test_a_time_already_past_publishes_at_confirm(api: Api, topic: str) -> None:
    producer = await _producer(api)
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    message_id = await api.prepared_id(producer, topic, deliver_after=past)
    confirmed = (await api.post(producer, f"/v1/messages/{message_id}/confirm")).json()
    assert confirmed["delivery_count"] == 1
    assert len(await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)) == 1


async def test_cancel_before_confirm_and_409_after(api: Api, worker: RedeliveryWorker,
                                                   topic: str) -> None:
    producer = await _producer(api)
    cancelled = await api.prepared_id(producer, topic, delay_seconds=0.5)
    assert (await api.post(producer, f"/v1/messages/{cancelled}/cancel")).json()["state"] == \
        "deleted"
    scheduled = await api.prepared_id(producer, topic, delay_seconds=60)
    await api.post(producer, f"/v1/messages/{scheduled}/confirm")
    refused = await api.post(producer, f"/v1/messages/{scheduled}/cancel")
    assert refused.status_code == 409
    assert refused.json()["current_state"] == "sent"
    again = await api.post(producer, f"/v1/messages/{scheduled}/confirm")  # idempotent
    assert (again.status_code, again.json()["delivery_count"]) == (200, 0)
    await tick_until(worker, _true, timeout=2)
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=1.0) == []


async def _true() -> bool:
    return True


async def test_stats_count_scheduled_and_do_not_age_them_as_unacked(
        api: Api, sql: SqlHelper, topic: str) -> None:
    producer = await _producer(api)
    message_id = await api.prepared_id(producer, topic, delay_seconds=600)
    await api.post(producer, f"/v1/messages/{message_id}/confirm")
    await sql.execute("UPDATE messages SET confirmed_at = now() - interval '1 hour' "
                      "WHERE message_id = :id", id=message_id)
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    (group,) = [g for g in stats["groups"] if g["topic"] == topic]
    assert group["counts"]["scheduled"] == 1
    assert group["counts"]["sent"] == 1
    assert group["oldest_unacked_age_seconds"] is None
    assert stats["totals"]["scheduled"] >= 1
    # once its time has come (and passed by a minute) it waits for an ack like any other
    await sql.execute("UPDATE messages SET deliver_after = now() - interval '1 minute' "
                      "WHERE message_id = :id", id=message_id)
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    (group,) = [g for g in stats["groups"] if g["topic"] == topic]
    assert group["counts"]["scheduled"] == 0
    assert 60 <= group["oldest_unacked_age_seconds"] < 120


async def test_retries_repeat_the_delay_or_conflict(api: Api, topic: str) -> None:
    producer = await _producer(api)
    when = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    body: dict[str, Any] = {"message_id": "delayed-retry", "deliver_after": when.isoformat()}
    assert (await api.prepare(producer, topic, **body)).status_code == 201
    assert (await api.prepare(producer, topic, **body)).status_code == 200
    same_instant = body | {"deliver_after": when.astimezone(
        UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert (await api.prepare(producer, topic, **same_instant)).status_code == 200
    later = body | {"deliver_after": (when + timedelta(seconds=1)).isoformat()}
    assert (await api.prepare(producer, topic, **later)).status_code == 409
    assert (await api.prepare(producer, topic, message_id="delayed-retry")).status_code == 409
    relative = {"message_id": "relative-retry", "delay_seconds": 30}
    assert (await api.prepare(producer, topic, **relative)).status_code == 201
    assert (await api.prepare(producer, topic, **relative)).status_code == 200
    assert (await api.prepare(producer, topic, message_id="relative-retry")).status_code == 409


@pytest.mark.parametrize("fields, fragment", [
    ({"delay_seconds": 5, "deliver_after": "2030-01-01T00:00:00Z"}, "not both"),
    ({"delay_seconds": 8 * 86_400}, "RMS_MAX_DELAY_SECONDS"),
    ({"deliver_after": "2099-01-01T00:00:00Z"}, "RMS_MAX_DELAY_SECONDS"),
    ({"delay_seconds": -1}, "greater than or equal to 0"),
    ({"delay_seconds": "5"}, "valid number"),
    ({"deliver_after": "2030-01-01T00:00:00"}, "offset"),
    ({"deliver_after": "2030-01-01"}, "offset"),
    ({"deliver_after": "tomorrow"}, "RFC 3339"),
    ({"deliver_after": 1767225600}, "RFC 3339"),
])
async def test_bad_delays_are_refused_with_422(api: Api, topic: str, fields: dict[str, Any],
                                               fragment: str) -> None:
    producer = await _producer(api)
    for path in ("/v1/messages", "/v1/messages/send"):
        response = await api.post(producer, path, json={
            "topic": topic, "payload": 1, "check_url": "http://127.0.0.1:1/c"} | fields)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert fragment in response.text
    batch = await api.post(producer, "/v1/messages/batch", json={"messages": [
        {"topic": topic, "payload": 1, "check_url": "http://127.0.0.1:1/c"},
        {"topic": topic, "payload": 2, "check_url": "http://127.0.0.1:1/c"} | fields]})
    assert batch.status_code == 422
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    assert not [g for g in stats["groups"] if g["topic"] == topic]  # nothing was stored


async def test_a_delayed_member_of_a_transaction_holds_the_later_ones_in_order(
        api: Api, worker: RedeliveryWorker, topic: str, unique: str) -> None:
    """A transaction of three whose second message is delayed: the confirm publishes the
    first, the third waits behind the second, and at its time both follow in order."""
    producer = await _producer(api)
    ids = [f"t{n}-{unique}" for n in range(3)]
    items: list[dict[str, Any]] = [{"message_id": i, "topic": topic, "payload": {"n": n}}
                                   for n, i in enumerate(ids)]
    items[1]["delay_seconds"] = 1.5
    created = await api.post(producer, "/v1/transactions", json={
        "transaction_id": f"tx-{unique}", "check_url": "http://127.0.0.1:1/c", "messages": items})
    assert created.status_code == 201, created.text
    confirmed = await api.post(producer, f"/v1/transactions/tx-{unique}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    assert (await message(api, ids[1]))["delivery_count"] == 0
    assert [await _published_at(api, i) != [] for i in ids] == [True, False, False]

    async def all_published() -> bool:
        return all([await _published_at(api, i) for i in ids])

    await tick_until(worker, all_published)
    times = [(await _published_at(api, i))[0] for i in ids]
    assert times == sorted(times)
    deliver_after = _at((await message(api, ids[1]))["deliver_after"])
    assert times[1] >= deliver_after
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3, settle=0.3)
    assert [header(list(r.headers), "rms-message-id") for r in records] == ids


async def test_an_ordered_member_waits_for_the_delayed_member_before_it(
        api: Api, worker: RedeliveryWorker, topic: str, unique: str) -> None:
    """A transaction whose first message is delayed and whose second is ordered (keyed, on an
    ordered topic): the sequencer does not publish the second before the first."""
    name = f"ledger-{unique}"
    producer = await _ordered_producer(api, name, topic)
    ids = [f"d-{unique}", f"o-{unique}"]
    items: list[dict[str, Any]] = [
        {"message_id": ids[0], "topic": topic, "payload": 0, "delay_seconds": 4.0},
        {"message_id": ids[1], "topic": topic, "key": "account-1", "payload": 1}]
    created = await api.post(producer, "/v1/transactions", json={
        "transaction_id": f"tx-{unique}", "check_url": "http://127.0.0.1:1/c", "messages": items})
    assert created.status_code == 201, created.text
    assert [m["ordered"] for m in created.json()["messages"]] == [False, True]
    assert (await api.post(producer, f"/v1/transactions/tx-{unique}/confirm")).status_code == 200
    await worker.tick()  # the sequencer has the ordered one due at once: it must wait
    assert [await _published_at(api, i) != [] for i in ids] == [False, False]

    async def all_published() -> bool:
        return all([await _published_at(api, i) for i in ids])

    await tick_until(worker, all_published)
    times = [(await _published_at(api, i))[0] for i in ids]
    assert times == sorted(times)
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2, settle=0.3)
    assert [header(list(r.headers), "rms-message-id") for r in records] == ids


async def test_a_delayed_ordered_message_behind_a_published_one_waits_for_its_time(
        api: Api, worker: RedeliveryWorker, topic: str, unique: str) -> None:
    """Two ordered messages of one key, the second delayed: the sequencer publishes the first
    and stops at the second until its deliver_after, although nothing holds it back."""
    name = f"ledger2-{unique}"
    producer = await _ordered_producer(api, name, topic)
    first = await api.prepared_id(producer, topic, key="account-2")
    delayed = await api.prepared_id(producer, topic, key="account-2", delay_seconds=4.0)
    for message_id in (first, delayed):
        assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    await worker.tick()
    assert [await _published_at(api, i) != [] for i in (first, delayed)] == [True, False]

    async def published() -> bool:
        return bool(await _published_at(api, delayed))

    await tick_until(worker, published)
    (at,) = await _published_at(api, delayed)
    assert at >= _at((await message(api, delayed))["deliver_after"])
