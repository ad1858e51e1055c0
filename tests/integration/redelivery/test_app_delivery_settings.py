"""A consumer app's own delivery settings (design sections 4 and 7), through the HTTP API
against real PostgreSQL and Kafka with an in-process recovery worker: ``max_deliveries`` and
``ack_timeout_seconds`` set at creation and changed, bad values refused with a problem
document and nothing stored, and the confirm giving each message the settings its
subscribers are owed, whatever the message asked."""

from __future__ import annotations

from typing import Any

import pytest

from rms.kafka.records import header
from rms.usecases.redelivery import RedeliveryWorker
from tests.integration.api.helpers import assert_problem
from tests.integration.redelivery.helpers import SqlHelper, events, message, tick_until
from tests.support import CHECK_PREFIX, Api, AppKeys, create_topic, read_topic

BASE = {"produce_topics": ["none"], "check_url_prefixes": []}


async def _create(api: Api, name: str, topic: str, **settings: Any) -> Any:
    return await api.client.post("/v1/admin/apps", headers=api.admin, json={
        "name": name, "consume_topics": [topic], **BASE, **settings})


async def _sent(api: Api, producer: AppKeys, topic: str, **fields: Any) -> str:
    message_id = await api.prepared_id(producer, topic, **fields)
    confirmed = await api.post(producer, f"/v1/messages/{message_id}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    return message_id


async def _settings(sql: SqlHelper, message_id: str) -> tuple[int, float, float | None]:
    """The message's ``max_deliveries``, ``ack_timeout_seconds`` and the seconds from its
    confirm to its next delivery (None: none is due, a dead message)."""
    [row] = await sql.rows(
        "SELECT max_deliveries, ack_timeout_seconds, extract(epoch FROM next_delivery_at - "
        "confirmed_at) AS wait FROM messages WHERE message_id = :id", id=message_id)
    return (int(row.max_deliveries), float(row.ack_timeout_seconds),
            None if row.wait is None else float(row.wait))


@pytest.mark.parametrize("bad", [
    {"max_deliveries": 0}, {"max_deliveries": 1001}, {"max_deliveries": -3},
    {"max_deliveries": "3"}, {"max_deliveries": 2.5}, {"max_deliveries": True},
    {"ack_timeout_seconds": 0}, {"ack_timeout_seconds": -1},
    {"ack_timeout_seconds": 604_801}, {"ack_timeout_seconds": "60"},
])
async def test_bad_settings_are_refused_and_nothing_is_stored(
        api: Api, topic: str, bad: dict[str, Any]) -> None:
    assert_problem(await _create(api, "slow", topic, **bad), 422)
    assert (await api.client.get("/v1/admin/apps/slow", headers=api.admin)).status_code == 404

    assert (await _create(api, "slow", topic, max_deliveries=4)).status_code == 201
    refused = await api.client.put("/v1/admin/apps/slow/delivery", headers=api.admin,
                                   json=bad)
    assert_problem(refused, 422)
    kept = (await api.client.get("/v1/admin/apps/slow", headers=api.admin)).json()
    assert (kept["max_deliveries"], kept["ack_timeout_seconds"]) == (4, None)


async def test_settings_are_set_at_creation_changed_and_shown(api: Api, topic: str) -> None:
    created = await _create(api, "slow", topic, max_deliveries=3, ack_timeout_seconds=900)
    assert created.status_code == 201, created.text
    assert (created.json()["max_deliveries"], created.json()["ack_timeout_seconds"]) == (3, 900)
    changed = await api.client.put("/v1/admin/apps/slow/delivery", headers=api.admin,
                                   json={"max_deliveries": 10})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["max_deliveries"], changed.json()["ack_timeout_seconds"]) == (10, None)
    listed = (await api.client.get("/v1/admin/apps", headers=api.admin)).json()["apps"]
    assert [(a["max_deliveries"], a["ack_timeout_seconds"]) for a in listed
            if a["name"] == "slow"] == [(10, None)]
    missing = await api.client.put("/v1/admin/apps/nobody/delivery", headers=api.admin,
                                   json={"max_deliveries": 2})
    assert_problem(missing, 404)
    extra = await api.client.put("/v1/admin/apps/slow/delivery", headers=api.admin,
                                 json={"max_deliveries": 2, "max_checks": 3})
    assert_problem(extra, 422)


async def test_a_consumers_budget_bounds_its_messages_whatever_they_ask(
        api: Api, topic: str, sql: SqlHelper, worker: RedeliveryWorker) -> None:
    producer = await api.create_app("orders", consume=["none"])
    assert (await _create(api, "slow", topic, max_deliveries=2,
                          ack_timeout_seconds=600)).status_code == 201
    message_id = await _sent(api, producer, topic, max_deliveries=6, ack_timeout_seconds=30)
    budget, timeout, wait = await _settings(sql, message_id)
    assert (budget, timeout) == (2, 600.0)
    assert wait is not None and 599 <= wait <= 601  # its first delivery waits the consumer's deadline
    assert (await message(api, message_id))["max_deliveries"] == 2

    await sql.make_due([message_id])
    await tick_until(worker, lambda: _delivered(api, message_id, 2))
    await sql.make_due([message_id])
    await tick_until(worker, lambda: _dead(api, message_id))
    dead = await message(api, message_id)
    assert (dead["delivery_count"], dead["dead_reason"]) == (2, "delivery-exhausted")

    raised = await api.client.put("/v1/admin/apps/slow/delivery", headers=api.admin,
                                  json={"max_deliveries": 9})
    assert raised.status_code == 200, raised.text
    assert (await _settings(sql, message_id))[0] == 2  # fixed at its confirm
    later = await _sent(api, producer, topic, max_deliveries=6, ack_timeout_seconds=30)
    assert (await _settings(sql, later))[:2] == (9, 30.0)  # no timeout of its own: the message's


async def test_several_subscribers_are_owed_the_largest_and_one_shot_sends_alike(
        api: Api, topic: str, sql: SqlHelper) -> None:
    producer = await api.create_app("orders", consume=["none"])
    assert (await _create(api, "slow", topic, max_deliveries=8,
                          ack_timeout_seconds=300)).status_code == 201
    assert (await _create(api, "quick", topic, max_deliveries=1,
                          ack_timeout_seconds=5)).status_code == 201
    confirmed = await _sent(api, producer, topic, max_deliveries=3, ack_timeout_seconds=60)
    assert (await _settings(sql, confirmed))[:2] == (8, 300.0)

    sent = await api.post(producer, "/v1/messages/send", json={
        "topic": topic, "payload": {"n": 1}, "check_url": CHECK_PREFIX + "check",
        "max_deliveries": 3, "ack_timeout_seconds": 60})
    assert sent.status_code == 201, sent.text
    assert (await _settings(sql, sent.json()["message_id"]))[:2] == (8, 300.0)

    await create_topic(api.settings.kafka_bootstrap_servers, f"{topic}-unread")
    nobody = await _sent(api, producer, f"{topic}-unread", max_deliveries=3,
                         ack_timeout_seconds=60)
    assert (await _settings(sql, nobody))[:2] == (3, 60.0)  # no subscribers: its own


async def _delivered(api: Api, message_id: str, count: int) -> bool:
    return int((await message(api, message_id))["delivery_count"]) >= count


async def _dead(api: Api, message_id: str) -> bool:
    return bool((await message(api, message_id))["dead"])


async def test_a_subscriber_with_a_smaller_budget_is_dead_alone_at_its_own_budget(
        api: Api, topic: str, sql: SqlHelper, worker: RedeliveryWorker) -> None:
    """``quick`` (1 delivery) and ``slow`` (8) share a message, which is owed 8: at the first
    redelivery quick's budget is spent, a ``dead`` event names it, and the records from then on
    await only slow. Once slow acked, the message owes only quick, whose budget is spent: it
    is dead, listed and resent for quick, whose budget then starts again."""
    producer = await api.create_app("orders", consume=["none"])
    slow = await _keys(api, "slow", topic, max_deliveries=8)
    await _keys(api, "quick", topic, max_deliveries=1)
    message_id = await _sent(api, producer, topic, max_deliveries=3)
    assert (await _settings(sql, message_id))[0] == 8

    await sql.make_due([message_id])
    await tick_until(worker, lambda: _delivered(api, message_id, 2))
    stored = await message(api, message_id)
    assert (stored["dead"], [(s["app"], s["exhausted"]) for s in stored["subscribers"]]) == (
        False, [("quick", True), ("slow", False)])
    assert [e["detail"] for e in await events(api, message_id) if e["event"] == "dead"] == [
        {"consumer": "quick", "reason": "delivery-exhausted", "deliveries": 1}]
    assert await _dead_for(api, "quick") == [message_id]
    assert await _dead_for(api, "slow") == []
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2)
    assert [(header(list(r.headers), "rms-delivery"), header(list(r.headers), "rms-awaiting"))
            for r in records] == [("1", "quick,slow"), ("2", "slow")]

    acked = await api.post(slow, f"/v1/messages/{message_id}/ack")
    assert acked.status_code == 200 and acked.json()["state"] == "sent", acked.text
    await sql.make_due([message_id])
    await tick_until(worker, lambda: _dead(api, message_id))
    dead = await message(api, message_id)
    assert (dead["delivery_count"], dead["dead_reason"]) == (2, "delivery-exhausted")

    resent = await api.client.post("/v1/admin/dead-letters/resend", headers=api.admin,
                                   json={"consumer": "quick", "limit": 10})
    assert resent.status_code == 200, resent.text
    again = await message(api, message_id)
    assert (again["dead"], again["delivery_count"]) == (False, 3)
    assert [(s["app"], s["exhausted"]) for s in again["subscribers"]] == [
        ("quick", False), ("slow", False)]
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3)
    assert header(list(records[-1].headers), "rms-awaiting") == "quick"


async def _keys(api: Api, name: str, topic: str, **settings: Any) -> AppKeys:
    created = await _create(api, name, topic, **settings)
    assert created.status_code == 201, created.text
    body = created.json()
    return AppKeys(name=name, api_key=body["api_key"], signing_secret=body["signing_secret"])


async def _dead_for(api: Api, consumer: str) -> list[str]:
    response = await api.client.get(f"/v1/admin/messages?dead=true&consumer={consumer}",
                                    headers=api.admin)
    assert response.status_code == 200, response.text
    return [m["message_id"] for m in response.json()["items"]]
