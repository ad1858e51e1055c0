"""The state machine over HTTP (design section 3): every legal transition, every illegal one
with its status, idempotent repeats, idempotent prepare, and ownership."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api.helpers import assert_problem, events, state_of, stored
from tests.support import Api, AppKeys


async def _act(api: Api, app: AppKeys, message_id: str, action: str) -> Any:
    return await api.post(app, f"/v1/messages/{message_id}/{action}")


async def _in_state(api: Api, app: AppKeys, topic: str, state: str) -> str:
    message_id = await api.prepared_id(app, topic)
    path = {"pending-send": [], "sent": ["confirm"], "done": ["confirm", "ack"],
            "deleted": ["cancel"]}[state]
    for action in path:
        response = await _act(api, app, message_id, action)
        assert response.status_code == 200, response.text
    assert await state_of(api, message_id) == state
    return message_id


async def test_legal_transitions(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    prepared = await api.prepare(app, topic, message_id="m-1", key="k")
    assert prepared.status_code == 201, prepared.text
    body = prepared.json()
    assert body["state"] == "pending-send"
    assert body["app"] == "producer" and body["message_id"] == "m-1" and body["dead"] is False
    assert body["confirmed_at"] is None and body["next_check_at"] is not None

    sent = await api.client.post("/v1/messages/send", headers=app.headers, json={
        "topic": topic, "payload": 2, "check_url": "http://127.0.0.1:1/c"})
    assert sent.status_code == 201, sent.text
    assert sent.json()["state"] == "sent" and sent.json()["delivery_count"] == 1

    confirmed = await _act(api, app, "m-1", "confirm")
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["state"] == "sent"
    assert confirmed.json()["confirmed_at"] is not None
    assert confirmed.json()["delivery_count"] == 1

    acked = await _act(api, app, "m-1", "ack")
    assert acked.status_code == 200, acked.text
    assert acked.json()["state"] == "done" and acked.json()["done_at"] is not None

    cancel_me = await api.prepared_id(app, topic)
    cancelled = await _act(api, app, cancel_me, "cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "deleted" and cancelled.json()["deleted_at"] is not None


@pytest.mark.parametrize(("state", "action"), [
    ("deleted", "confirm"),
    ("sent", "cancel"),
    ("done", "cancel"),
    ("pending-send", "ack"),
    ("deleted", "ack"),
])
async def test_illegal_transitions_are_409_naming_the_state(
        api: Api, topic: str, state: str, action: str) -> None:
    app = await api.create_app("producer")
    message_id = await _in_state(api, app, topic, state)
    before = await events(api, message_id)
    response = await _act(api, app, message_id, action)
    problem = assert_problem(response, 409, contains=state)
    assert problem["current_state"] == state
    assert message_id in problem["detail"]
    assert await state_of(api, message_id) == state
    assert await events(api, message_id) == before


@pytest.mark.parametrize(("state", "action"), [
    ("sent", "confirm"),
    ("done", "confirm"),
    ("deleted", "cancel"),
    ("done", "ack"),
])
async def test_repeats_are_idempotent(api: Api, topic: str, state: str, action: str) -> None:
    app = await api.create_app("producer")
    message_id = await _in_state(api, app, topic, state)
    before = await events(api, message_id)
    for _ in range(2):
        response = await _act(api, app, message_id, action)
        assert response.status_code == 200, response.text
        assert response.json()["state"] == state
    assert await events(api, message_id) == before


async def test_repeated_prepare(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    other = await api.create_app("other")
    fields: dict[str, Any] = {"message_id": "same", "key": "k", "payload": {"a": [1, 2]},
                              "headers": {"h": "v"}}
    first = await api.prepare(app, topic, **fields)
    assert first.status_code == 201, first.text
    again = await api.prepare(app, topic, **fields)
    assert again.status_code == 200, again.text
    assert again.json() == first.json()

    changes: list[dict[str, Any]] = [{"payload": {"a": [2, 1]}}, {"key": "k2"}, {"headers": {}},
                                     {"topic": topic + ".x"},
                                     {"check_url": "http://127.0.0.1:1/other"}]
    for change in changes:
        body = fields | change
        target = str(body.pop("topic", topic))
        assert_problem(await api.prepare(app, target, **body), 409, contains="same")
    # another app may not reuse the id either, and learns nothing about the message
    taken = await api.prepare(other, topic, **fields)
    problem = assert_problem(taken, 409)
    assert "payload" not in problem and "producer" not in problem["detail"]

    items = await stored(api)
    assert len(items) == 1
    assert items[0] == first.json()
    assert [e["event"] for e in await events(api, "same")] == ["prepared"]


async def test_another_apps_message_is_404(api: Api, topic: str) -> None:
    owner = await api.create_app("owner")
    stranger = await api.create_app("stranger")
    message_id = await api.prepared_id(owner, topic)
    for method, suffix in [("GET", ""), ("GET", "/events"), ("POST", "/confirm"),
                           ("POST", "/cancel")]:
        response = await api.client.request(method, f"/v1/messages/{message_id}{suffix}",
                                            headers=stranger.headers)
        assert_problem(response, 404)
    batch = await api.post(stranger, "/v1/messages/batch/confirm",
                           json={"message_ids": [message_id]})
    assert_problem(batch, 404)
    assert await state_of(api, message_id) == "pending-send"
    mine = await api.client.get(f"/v1/messages/{message_id}", headers=owner.headers)
    assert mine.status_code == 200 and mine.json()["state"] == "pending-send"


async def test_events_in_order(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    message_id = await api.prepared_id(app, topic)
    assert (await _act(api, app, message_id, "confirm")).status_code == 200
    assert (await _act(api, app, message_id, "ack")).status_code == 200
    response = await api.client.get(f"/v1/messages/{message_id}/events", headers=app.headers)
    assert response.status_code == 200, response.text
    found = response.json()["events"]
    assert [e["event"] for e in found] == ["prepared", "confirmed", "published", "acked"]
    assert found[1]["detail"]["by"] == "producer"
    assert found[2]["detail"]["delivery"] == 1
    assert [e["at"] for e in found] == sorted(e["at"] for e in found)
    assert all(e["actor"] == "app:producer" for e in found)


async def test_ack_permission(api: Api, topic: str) -> None:
    producer = await api.create_app("producer", consume=["elsewhere.*"])
    unrelated = await api.create_app("unrelated", consume=["elsewhere.*"])
    consumer = await api.create_app("consumer", produce=["elsewhere.*"], consume=[topic])
    message_id = await _in_state(api, producer, topic, "sent")
    assert_problem(await _act(api, producer, message_id, "ack"), 403, contains=topic)
    assert_problem(await _act(api, unrelated, message_id, "ack"), 404)
    assert await state_of(api, message_id) == "sent"
    acked = await _act(api, consumer, message_id, "ack")
    assert acked.status_code == 200, acked.text
    assert acked.json()["state"] == "done"
    # the consumer acks by id alone; it still cannot read or confirm the producer's message
    assert_problem(await api.client.get(f"/v1/messages/{message_id}",
                                        headers=consumer.headers), 404)


async def test_route_names_are_reserved_ids(api: Api, topic: str) -> None:
    """'batch' and 'send' would collide with /v1/messages/batch/confirm and /send: refused."""
    app = await api.create_app("producer")
    for reserved in ("batch", "send"):
        response = await api.prepare(app, topic, message_id=reserved)
        assert response.status_code == 422, response.text
        assert "reserved" in response.json()["detail"]
