"""Batch prepare / confirm / cancel: all or nothing, failures name the item (design 4)."""

from __future__ import annotations

from typing import Any

from tests.integration.api.conftest import SMALL_BATCH_ITEMS
from tests.integration.api.helpers import assert_problem, events, state_of, stored
from tests.support import CHECK_PREFIX, Api, AppKeys, read_topic


def _item(topic: str, n: int, **fields: Any) -> dict[str, Any]:
    return {"message_id": f"b-{n}", "topic": topic, "payload": {"n": n},
            "check_url": CHECK_PREFIX + "check"} | fields


async def _batch(api: Api, app: AppKeys, topic: str, count: int) -> list[str]:
    response = await api.post(app, "/v1/messages/batch",
                              json={"messages": [_item(topic, n) for n in range(count)]})
    assert response.status_code == 201, response.text
    return [m["message_id"] for m in response.json()["messages"]]


async def test_batch_prepare_creates_all_in_order(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    items = [_item(topic, n, key=f"k{n}") for n in (3, 1, 2)] + [
        {"topic": topic, "payload": None, "check_url": CHECK_PREFIX + "c"}]
    response = await api.post(app, "/v1/messages/batch", json={"messages": items})
    assert response.status_code == 201, response.text
    found = response.json()["messages"]
    assert [m["message_id"] for m in found[:3]] == ["b-3", "b-1", "b-2"]
    assert found[3]["message_id"]  # generated
    assert [m["payload"] for m in found] == [{"n": 3}, {"n": 1}, {"n": 2}, None]
    assert {m["state"] for m in found} == {"pending-send"}
    assert len(await stored(api)) == 4
    # an identical retry of the whole batch is safe
    again = await api.post(app, "/v1/messages/batch", json={"messages": items[:3]})
    assert again.status_code in {200, 201}, again.text
    assert again.json()["messages"] == found[:3]
    assert len(await stored(api)) == 4


async def test_one_bad_item_rejects_the_whole_batch(api: Api, topic: str, unique: str) -> None:
    app = await api.create_app("producer", produce=[topic])
    items = [_item(topic, n) for n in range(4)]
    items[2]["topic"] = f"forbidden.{unique}"
    assert_problem(await api.post(app, "/v1/messages/batch", json={"messages": items}), 403,
                   contains="messages[2]")
    assert await stored(api) == []

    items = [_item(topic, n) for n in range(4)]
    items[1]["check_url"] = "ftp://127.0.0.1:1/check"
    assert_problem(await api.post(app, "/v1/messages/batch", json={"messages": items}), 422,
                   contains="messages[1]")
    items = [_item(topic, n) for n in range(4)]
    items[3]["headers"] = {"rms-delivery": "9"}
    assert_problem(await api.post(app, "/v1/messages/batch", json={"messages": items}), 422,
                   contains="messages[3]")
    assert await stored(api) == []

    # an item conflicting with a stored message rolls the others back too
    assert (await api.prepare(app, topic, message_id="b-2", payload="other")).status_code == 201
    items = [_item(topic, n) for n in range(4)]
    assert_problem(await api.post(app, "/v1/messages/batch", json={"messages": items}), 409,
                   contains="b-2")
    assert [m["message_id"] for m in await stored(api)] == ["b-2"]


async def test_duplicate_ids_in_a_batch_are_422(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    items = [_item(topic, 0), _item(topic, 1), _item(topic, 0)]
    assert_problem(await api.post(app, "/v1/messages/batch", json={"messages": items}), 422,
                   contains="messages[2]")
    assert await stored(api) == []
    ids = await _batch(api, app, topic, 2)
    for action in ("confirm", "cancel"):
        response = await api.post(app, f"/v1/messages/batch/{action}",
                                  json={"message_ids": [ids[0], ids[1], ids[0]]})
        assert_problem(response, 422, contains="message_ids[2]")
    assert {await state_of(api, i) for i in ids} == {"pending-send"}


async def test_too_many_items_are_413(small_api: Api, topic: str) -> None:
    api = small_api
    app = await api.create_app("producer")
    items = [_item(topic, n) for n in range(SMALL_BATCH_ITEMS + 1)]
    assert_problem(await api.post(app, "/v1/messages/batch", json={"messages": items}), 413)
    assert await stored(api) == []
    ids = await _batch(api, app, topic, SMALL_BATCH_ITEMS)
    for action in ("confirm", "cancel"):
        response = await api.post(app, f"/v1/messages/batch/{action}",
                                  json={"message_ids": [*ids, "extra"]})
        assert_problem(response, 413)
    assert {await state_of(api, i) for i in ids} == {"pending-send"}


async def test_batch_confirm_publishes_all(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    ids = await _batch(api, app, topic, 3)
    response = await api.post(app, "/v1/messages/batch/confirm", json={"message_ids": ids})
    assert response.status_code == 200, response.text
    assert [m["message_id"] for m in response.json()["messages"]] == ids
    assert {m["state"] for m in response.json()["messages"]} == {"sent"}
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=3,
                               settle=1.0)
    assert sorted(dict(r.headers)["rms-message-id"].decode() for r in records) == sorted(ids)
    # idempotent repeat: 200, nothing published again
    again = await api.post(app, "/v1/messages/batch/confirm", json={"message_ids": ids})
    assert again.status_code == 200, again.text
    for message_id in ids:
        assert [e["event"] for e in await events(api, message_id)].count("published") == 1


async def test_batch_confirm_with_a_deleted_item_changes_nothing(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    ids = await _batch(api, app, topic, 4)
    assert (await api.post(app, f"/v1/messages/{ids[2]}/cancel")).status_code == 200
    response = await api.post(app, "/v1/messages/batch/confirm", json={"message_ids": ids})
    assert_problem(response, 409, contains="message_ids[2]")
    assert "deleted" in response.json()["detail"]
    assert [await state_of(api, i) for i in ids] == [
        "pending-send", "pending-send", "deleted", "pending-send"]
    for message_id in (ids[0], ids[1], ids[3]):
        assert [e["event"] for e in await events(api, message_id)] == ["prepared"]
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=2.0) == []


async def test_batch_cancel_with_a_sent_item_changes_nothing(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    ids = await _batch(api, app, topic, 3)
    assert (await api.post(app, f"/v1/messages/{ids[1]}/confirm")).status_code == 200
    response = await api.post(app, "/v1/messages/batch/cancel", json={"message_ids": ids})
    assert_problem(response, 409, contains="message_ids[1]")
    assert [await state_of(api, i) for i in ids] == ["pending-send", "sent", "pending-send"]
    ok = await api.post(app, "/v1/messages/batch/cancel", json={"message_ids": [ids[0], ids[2]]})
    assert ok.status_code == 200, ok.text
    assert [m["state"] for m in ok.json()["messages"]] == ["deleted", "deleted"]


async def test_unknown_id_in_a_batch_is_404_naming_it(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    ids = await _batch(api, app, topic, 2)
    for action in ("confirm", "cancel"):
        response = await api.post(app, f"/v1/messages/batch/{action}",
                                  json={"message_ids": [ids[0], "ghost", ids[1]]})
        assert_problem(response, 404, contains="message_ids[1]")
        assert "ghost" in response.json()["detail"]
    assert [await state_of(api, i) for i in ids] == ["pending-send", "pending-send"]
