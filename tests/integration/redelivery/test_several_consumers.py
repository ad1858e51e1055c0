"""Several consumers per message (design section 3), through the HTTP API against real
PostgreSQL and Kafka with an in-process recovery worker: a message is done only when every
subscriber acked; it is redelivered to the ones still owing (``rms-awaiting``), dead for them
alone, resent for them, and a consumer that goes away is released."""

from __future__ import annotations

from typing import Any

from aiokafka import ConsumerRecord

from rms.kafka.records import header
from rms.usecases.redelivery import RedeliveryWorker
from tests.integration.redelivery.helpers import SqlHelper, events, message, tick_until
from tests.support import Api, AppKeys, read_topic


async def _apps(api: Api, topic: str) -> tuple[AppKeys, AppKeys, AppKeys]:
    """A producer that consumes nothing, and two consumer apps of ``topic``."""
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    invoices = await api.create_app("invoices", produce=["none"], consume=["*"])
    return producer, points, invoices


async def _sent(api: Api, producer: AppKeys, topic: str, **fields: Any) -> str:
    message_id = await api.prepared_id(producer, topic, **fields)
    confirmed = await api.post(producer, f"/v1/messages/{message_id}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    return message_id


async def _ack(api: Api, consumer: AppKeys, message_id: str) -> dict[str, Any]:
    response = await api.post(consumer, f"/v1/messages/{message_id}/ack")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _awaiting(record: ConsumerRecord[bytes, bytes]) -> str | None:
    return header(list(record.headers), "rms-awaiting")


def _acks_of(found: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(e["event"], e["detail"]) for e in found
            if e["event"] in {"acked", "ack-ignored", "released", "dead"}]


async def test_done_only_when_every_subscriber_acked_and_the_redelivery_names_the_one_owing(
        api: Api, topic: str, sql: SqlHelper, worker: RedeliveryWorker) -> None:
    producer, points, invoices = await _apps(api, topic)
    message_id = await _sent(api, producer, topic)
    stored = await message(api, message_id)
    assert stored["subscribers"] == [{"app": "invoices", "acked_at": None, "via": None,
                                      "exhausted": False},
                                     {"app": "points", "acked_at": None, "via": None,
                                      "exhausted": False}]

    after_one = await _ack(api, points, message_id)
    assert after_one["state"] == "sent"
    assert [s["app"] for s in after_one["subscribers"] if s["acked_at"]] == ["points"]
    assert after_one["acks"]["points"]["via"] == "http"

    await sql.make_due([message_id])
    await tick_until(worker, lambda: _delivered(api, message_id, 2))
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2)
    assert [_awaiting(r) for r in records] == ["invoices,points", "invoices"]

    repeat = await _ack(api, points, message_id)
    assert repeat["state"] == "sent" and repeat["acks"] == after_one["acks"]
    done = await _ack(api, invoices, message_id)
    assert done["state"] == "done" and done["next_delivery_at"] is None
    assert [(s["app"], s["via"]) for s in done["subscribers"]] == [("invoices", "http")]
    whole = await message(api, message_id)  # a consumer's answer holds its own part alone
    assert {s["app"]: s["via"] for s in whole["subscribers"]} == {"invoices": "http",
                                                                 "points": "http"}
    again = await _ack(api, invoices, message_id)
    assert again == done
    assert _acks_of(await events(api, message_id)) == [
        ("acked", {"via": "http", "done": False}), ("acked", {"via": "http", "done": True})]


async def _delivered(api: Api, message_id: str, count: int) -> bool:
    return bool((await message(api, message_id))["delivery_count"] >= count)


async def test_an_app_given_the_topic_after_the_confirm_owes_nothing_and_finishes_nothing(
        api: Api, topic: str) -> None:
    producer, _points, _invoices = await _apps(api, topic)
    message_id = await _sent(api, producer, topic)
    late = await api.create_app("shipping", produce=["none"], consume=[topic])

    ignored = await _ack(api, late, message_id)
    assert ignored["state"] == "sent" and ignored["acks"] is None
    assert ignored["subscribers"] == []  # it sees no other consumer's part
    assert [s["app"] for s in (await message(api, message_id))["subscribers"]] == [
        "invoices", "points"]
    assert _acks_of(await events(api, message_id)) == [
        ("ack-ignored", {"via": "http", "reason": "not-a-subscriber"})]
    later = await _sent(api, producer, topic)
    assert [s["app"] for s in (await message(api, later))["subscribers"]] == [
        "invoices", "points", "shipping"]


async def test_a_consumer_that_never_acks_ends_dead_for_itself_alone(
        api: Api, topic: str, sql: SqlHelper, worker: RedeliveryWorker) -> None:
    producer, points, invoices = await _apps(api, topic)
    message_id = await _sent(api, producer, topic, max_deliveries=2)
    await _ack(api, points, message_id)
    await sql.make_due([message_id])
    await tick_until(worker, lambda: _delivered(api, message_id, 2))
    await sql.make_due([message_id])
    await tick_until(worker, lambda: _dead(api, message_id))
    dead = await message(api, message_id)
    assert (dead["state"], dead["dead"], dead["dead_reason"]) == ("sent", True,
                                                                  "delivery-exhausted")
    assert dead["acks"]["points"]["via"] == "http"  # the other's ack stands
    [dead_event] = [d for e, d in _acks_of(await events(api, message_id)) if e == "dead"]
    assert dead_event["consumers"] == ["invoices"]

    owed = await _listing(api, "state=sent&dead=true&consumer=invoices")
    assert owed == [message_id]
    assert await _listing(api, "state=sent&dead=true&consumer=points") == []
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    assert [c["consumer"] for c in stats["consumers"]] == ["invoices"]
    assert stats["consumers"][0]["unacked"] == 1

    resent = await api.client.post(f"/v1/admin/messages/{message_id}/resend", headers=api.admin)
    assert resent.status_code == 200, resent.text
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3)
    assert _awaiting(records[-1]) == "invoices"

    late = await _ack(api, invoices, message_id)
    assert (late["state"], late["dead"], late["dead_reason"]) == ("done", False, None)


async def _dead(api: Api, message_id: str) -> bool:
    return bool((await message(api, message_id))["dead"])


async def _listing(api: Api, query: str) -> list[str]:
    response = await api.client.get(f"/v1/admin/messages?{query}", headers=api.admin)
    assert response.status_code == 200, response.text
    return [m["message_id"] for m in response.json()["items"]]


async def test_a_late_ack_that_leaves_another_owing_keeps_the_message_dead(
        api: Api, topic: str, sql: SqlHelper) -> None:
    producer, points, _invoices = await _apps(api, topic)
    message_id = await _sent(api, producer, topic)
    await sql.make_dead([message_id])
    still = await _ack(api, points, message_id)
    assert (still["state"], still["dead"]) == ("sent", True)
    assert await _listing(api, "dead=true&consumer=invoices") == [message_id]
    for consumer, expected in (("invoices", [message_id]), ("points", [])):
        dry = await api.client.post("/v1/admin/dead-letters/resend", headers=api.admin, json={
            "consumer": consumer, "limit": 10, "dry_run": True})
        assert dry.status_code == 200, dry.text
        assert [m["message_id"] for m in dry.json()["messages"]] == expected


async def test_a_consumer_whose_topics_stop_matching_is_released(
        api: Api, topic: str) -> None:
    producer, points, _invoices = await _apps(api, topic)
    acked_by_points, owed_by_both = (await _sent(api, producer, topic),
                                     await _sent(api, producer, topic))
    await _ack(api, points, acked_by_points)

    response = await api.client.put("/v1/admin/apps/invoices/consume-topics",
                                    json={"consume_topics": ["elsewhere.*"]}, headers=api.admin)
    assert response.status_code == 200, response.text
    assert response.json()["consume_topics"] == ["elsewhere.*"]

    finished = await message(api, acked_by_points)
    assert finished["state"] == "done" and [s["app"] for s in finished["subscribers"]] == [
        "points"]
    assert _acks_of(await events(api, acked_by_points))[-1] == (
        "released", {"consumer": "invoices", "reason": "unsubscribed", "done": True})
    waiting = await message(api, owed_by_both)
    assert waiting["state"] == "sent"
    assert [s["app"] for s in waiting["subscribers"]] == ["points"]
    assert (await _ack(api, points, owed_by_both))["state"] == "done"
    unknown = await api.client.put("/v1/admin/apps/nobody/consume-topics",
                                   json={"consume_topics": []}, headers=api.admin)
    assert unknown.status_code == 404


async def test_a_deleted_consumer_is_released_and_a_producer_with_messages_is_kept(
        api: Api, topic: str) -> None:
    producer, points, _invoices = await _apps(api, topic)
    owed_by_both, owed_by_invoices = (await _sent(api, producer, topic),
                                      await _sent(api, producer, topic))
    await _ack(api, points, owed_by_invoices)

    deleted = await api.client.delete("/v1/admin/apps/invoices", headers=api.admin)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"name": "invoices", "released": 2}
    assert (await message(api, owed_by_invoices))["state"] == "done"
    assert (await message(api, owed_by_both))["state"] == "sent"
    assert _acks_of(await events(api, owed_by_both)) == [
        ("released", {"consumer": "invoices", "reason": "app-deleted", "done": False})]
    gone = await api.client.get("/v1/admin/apps/invoices", headers=api.admin)
    assert gone.status_code == 404

    kept = await api.client.delete("/v1/admin/apps/orders", headers=api.admin)
    assert kept.status_code == 409, kept.text
    assert (await api.client.get("/v1/admin/apps/orders", headers=api.admin)).status_code == 200


async def test_the_last_subscriber_released_without_any_ack_leaves_nobody_owing(
        api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    await api.create_app("points", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)
    deleted = await api.client.delete("/v1/admin/apps/points", headers=api.admin)
    assert deleted.json()["released"] == 1
    finished = await message(api, message_id)
    assert (finished["state"], finished["subscribers"], finished["acks"]) == ("done", [], None)


async def test_each_member_of_a_transaction_has_its_own_subscribers(
        api: Api, topic: str) -> None:
    producer, _points, invoices = await _apps(api, topic)
    other = f"{topic}.other"
    body = {"check_url": "http://127.0.0.1:1/check",
            "messages": [{"topic": topic, "payload": {"n": 1}},
                         {"topic": other, "payload": {"n": 2}}]}
    created = await api.post(producer, "/v1/transactions", json=body)
    assert created.status_code == 201, created.text
    transaction_id = created.json()["transaction_id"]
    confirmed = await api.post(producer, f"/v1/transactions/{transaction_id}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    first, second = confirmed.json()["messages"]
    assert [s["app"] for s in first["subscribers"]] == ["invoices", "points"]
    assert [s["app"] for s in second["subscribers"]] == ["invoices"]
    assert (await _ack(api, invoices, second["message_id"]))["state"] == "done"
    assert (await _ack(api, invoices, first["message_id"]))["state"] == "sent"


async def test_a_topic_nobody_consumes_keeps_the_single_ack_rule(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    message_id = await _sent(api, producer, topic)
    assert (await message(api, message_id))["subscribers"] is None
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert _awaiting(records[0]) is None
    consumer = await api.create_app("points", produce=["none"], consume=[topic])
    done = await _ack(api, consumer, message_id)
    assert done["state"] == "done" and done["subscribers"] is None
    assert done["acks"]["points"]["via"] == "http"


async def test_a_one_shot_send_and_an_admin_confirm_fix_the_subscribers_too(
        api: Api, topic: str) -> None:
    producer, points, _invoices = await _apps(api, topic)
    sent = await api.post(producer, "/v1/messages/send", json={
        "topic": topic, "payload": {"n": 1}, "check_url": "http://127.0.0.1:1/check"})
    assert sent.status_code == 201, sent.text
    assert [s["app"] for s in sent.json()["subscribers"]] == ["invoices", "points"]
    prepared = await api.prepared_id(producer, topic)
    confirmed = await api.client.post(f"/v1/admin/messages/{prepared}/confirm",
                                      headers=api.admin)
    assert confirmed.status_code == 200, confirmed.text
    assert [s["app"] for s in confirmed.json()["subscribers"]] == ["invoices", "points"]
    assert (await _ack(api, points, prepared))["state"] == "sent"
