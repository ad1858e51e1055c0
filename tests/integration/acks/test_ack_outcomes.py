"""Every ack says what it did (design section 3): recorded, or why it recorded nothing, in the
answer's ``RMS-Ack`` and in ``rms_acks_not_recorded_total``; a consumer sees only its own part
of the message; a non-subscriber's repeated acks leave one ``ack-ignored`` event; the history
is read a page at a time. And apps that an earlier release wrote (created without the regex of
their consume topics, or with their topics changed under the regex) count again: the ack finds
the app repaired, and a real ``rms serve`` repairs the others by itself."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import REGISTRY

from rms.config import Settings
from rms.store.apps import AppStore
from rms.store.database import create_engine
from rms.store.messages import MessageStore
from rms.store.subscriptions.store import SubscriptionStore
from rms.usecases.acks import Acks
from rms_client.ack_records import AckRecord, ack_value, signed_ack_headers
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, rms_serve
from tests.support import Api, AppKeys, eventually


def _not_recorded(via: str, reason: str) -> float:
    value = REGISTRY.get_sample_value("rms_acks_not_recorded_total",
                                      {"via": via, "reason": reason})
    return value or 0.0


async def _sent(api: Api, producer: AppKeys, topic: str) -> str:
    message_id = await api.prepared_id(producer, topic)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


async def _ack(api: Api, consumer: AppKeys, message_id: str) -> tuple[str, dict[str, Any]]:
    response = await api.post(consumer, f"/v1/messages/{message_id}/ack")
    assert response.status_code == 200, response.text
    return response.headers["rms-ack"], response.json()


async def _events(api: Api, message_id: str, **query: Any) -> dict[str, Any]:
    response = await api.client.get(f"/v1/admin/messages/{message_id}/events",
                                    headers=api.admin, params=query)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def test_an_ack_that_records_nothing_says_why_and_is_counted(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    invoices = await api.create_app("invoices", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)
    late = await api.create_app("late", produce=["none"], consume=[topic])
    before = {reason: _not_recorded("http", reason)
              for reason in ("repeated", "not-a-subscriber", "already-done")}

    assert (await _ack(api, points, message_id))[0] == "recorded"
    outcome, seen = await _ack(api, points, message_id)
    assert (outcome, seen["state"]) == ("repeated", "sent")
    assert (await _ack(api, late, message_id))[0] == "not-a-subscriber"
    assert (await _ack(api, invoices, message_id))[0] == "recorded"
    outcome, seen = await _ack(api, late, message_id)
    assert (outcome, seen["state"]) == ("already-done", "done")

    assert _not_recorded("http", "repeated") == before["repeated"] + 1
    assert _not_recorded("http", "not-a-subscriber") == before["not-a-subscriber"] + 1
    assert _not_recorded("http", "already-done") == before["already-done"] + 1


async def test_a_consumer_sees_only_its_own_part_of_the_message(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=[topic])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    invoices = await api.create_app("invoices", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)
    late = await api.create_app("late", produce=["none"], consume=[topic])
    await _ack(api, invoices, message_id)

    _, seen = await _ack(api, points, message_id)
    assert [s["app"] for s in seen["subscribers"]] == ["points"]
    assert set(seen["acks"]) == {"points"}
    _, seen = await _ack(api, late, message_id)  # not a subscriber: nobody else's names
    assert seen["subscribers"] == [] and seen["acks"] is None
    _, seen = await _ack(api, producer, message_id)  # the producer sees its whole message
    assert [s["app"] for s in seen["subscribers"]] == ["invoices", "orders", "points"]


async def test_a_non_subscribers_repeated_acks_leave_one_event(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    await api.create_app("points", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)
    late = await api.create_app("late", produce=["none"], consume=[topic])
    for _ in range(20):
        assert (await _ack(api, late, message_id))[0] == "not-a-subscriber"
    events = [e["event"] for e in (await _events(api, message_id))["events"]]
    assert events.count("ack-ignored") == 1


async def test_the_history_is_read_a_page_at_a_time(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    consumer = await api.create_app("points", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)
    await _ack(api, consumer, message_id)
    whole = (await _events(api, message_id))["events"]
    assert [e["event"] for e in whole] == ["prepared", "confirmed", "published", "acked"]

    pages, cursor = [], None
    while True:
        page = await _events(api, message_id, limit=3, **({"cursor": cursor} if cursor else {}))
        pages.append(page["events"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [3, 1]
    assert [e for p in pages for e in p] == whole
    mine = await api.client.get(f"/v1/messages/{message_id}/events", headers=producer.headers,
                                params={"limit": 2})
    assert [e["event"] for e in mine.json()["events"]] == ["prepared", "confirmed"]
    for wrong in ({"cursor": "nonsense"}, {"limit": 0}, {"limit": 1001}):
        answer = await api.client.get(f"/v1/admin/messages/{message_id}/events",
                                      headers=api.admin, params=wrong)
        assert answer.status_code == 422, answer.text


@contextlib.asynccontextmanager
async def served_api(settings: Settings) -> AsyncIterator[Api]:
    from message_service.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, ADMIN_TOKEN, settings)


async def _old_release_changes_topics(settings: Settings, app: str, topics: list[str]) -> None:
    """What an earlier release's consume-topics change writes: the topics alone."""
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(
                "UPDATE apps SET consume_topics = $1::text[] WHERE name = $2", (topics, app))
    finally:
        await engine.dispose()


async def test_an_ack_finds_an_app_an_earlier_release_changed_repaired(
        settings: Settings, topic: str) -> None:
    # no repair but the one at start: the ack itself must find the app and repair it
    async with served_api(settings.model_copy(update={"apps_repair_seconds": 3600})) as api:
        await _widened_then_acked(api, topic)


async def _widened_then_acked(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    invoices = await api.create_app("invoices", produce=["none"], consume=[topic])
    by_http, by_record = await _sent(api, producer, topic), await _sent(api, producer, topic)
    for consumer in ("points", "invoices"):  # an earlier release widens their topics
        await _old_release_changes_topics(api.settings, consumer, [topic, "other.*"])

    assert (await _ack(api, points, by_http))[0] == "recorded"
    stored = await api.client.get(f"/v1/admin/messages/{by_record}", headers=api.admin)
    value = ack_value(by_record, "invoices", stored.json()["created_at"])
    record = AckRecord.of(value, list(signed_ack_headers([invoices.signing_secret], value)))
    engine = create_engine(api.settings)
    try:  # the ack consumer's use case, given the record as a poll would hand it over
        acks = Acks(api.settings, MessageStore(engine), AppStore(engine), SubscriptionStore(engine))
        await _old_release_changes_topics(api.settings, "invoices", [topic, "again.*"])
        assert await acks.apply_records([record]) == 1
    finally:
        await engine.dispose()
    answer = await api.client.get(f"/v1/admin/messages/{by_record}", headers=api.admin)
    assert set(answer.json()["acks"]) == {"invoices"}


async def test_rms_serve_repairs_apps_an_earlier_release_created(
        settings: Settings, tmp_path: Path, topic: str) -> None:
    with rms_serve(settings, tmp_path / "serve.log", {}) as port:
        base = f"http://127.0.0.1:{port}"
        producer = create_app_keys(base, ADMIN_TOKEN, "orders", consume_topics=["none"])
        engine = create_engine(settings)
        try:  # what an earlier release's app creation writes: no regex
            async with engine.begin() as conn:
                await conn.exec_driver_sql(
                    "INSERT INTO apps (name, api_key_hash, signing_secret, produce_topics, "
                    "consume_topics, check_url_prefixes) VALUES ('old', 'h-old', 'whsec_x', "
                    "'{none}', $1::text[], '{}')", ([topic],))

            async def repaired() -> bool:
                async with engine.connect() as conn:
                    row = (await conn.exec_driver_sql(
                        "SELECT consume_regex IS NOT NULL AND consume_regex_of = consume_topics "
                        "FROM apps WHERE name = 'old'")).scalar()
                return bool(row)

            await eventually(repaired, timeout=15)
        finally:
            await engine.dispose()
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            headers = {"Authorization": f"Bearer {producer['api_key']}"}
            sent = await client.post("/v1/messages/send", headers=headers, json={
                "topic": topic, "payload": {}, "check_url": "http://127.0.0.1:1/check"})
            assert sent.status_code == 201, sent.text
            assert [s["app"] for s in sent.json()["subscribers"]] == ["old"]

