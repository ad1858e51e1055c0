"""Transactions of several messages over the HTTP API (design section 4, "Transactions"): real
API, real PostgreSQL, real broker."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import orjson
import pytest

from rms.kafka.records import header
from tests.support import CHECK_PREFIX, Api, AppKeys, read_topic

CHECK_URL = CHECK_PREFIX + "check"


def body(topics: list[str], transaction_id: str | None = None, **fields: Any
         ) -> dict[str, Any]:
    items = [{"message_id": f"{transaction_id}-m{n}", "topic": t, "payload": {"n": n}}
             if transaction_id else {"topic": t, "payload": {"n": n}}
             for n, t in enumerate(topics)]
    return ({"check_url": CHECK_URL, "messages": items}
            | ({"transaction_id": transaction_id} if transaction_id else {}) | fields)


async def create(api: Api, app: AppKeys, payload: dict[str, Any], status: int = 201
                 ) -> dict[str, Any]:
    response = await api.post(app, "/v1/transactions", json=payload)
    assert response.status_code == status, response.text
    data: dict[str, Any] = response.json()
    return data


async def test_create_get_confirm_publishes_in_order(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    topics = [f"orders.{unique}", f"billing.{unique}", f"orders.{unique}"]
    created = await create(api, orders, body(topics, f"tx-{unique}"))

    assert created["transaction_id"] == f"tx-{unique}"
    assert created["state"] == "pending" and created["check_count"] == 0
    assert created["check_url"] == CHECK_URL
    assert [m["message_id"] for m in created["messages"]] == [
        f"tx-{unique}-m0", f"tx-{unique}-m1", f"tx-{unique}-m2"]
    assert [m["state"] for m in created["messages"]] == ["pending-send"] * 3
    assert all(m["next_check_at"] is None for m in created["messages"])  # checked as one

    read = await api.client.get(f"/v1/transactions/tx-{unique}", headers=orders.headers)
    assert read.status_code == 200 and read.json() == created

    confirmed = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    data = confirmed.json()
    assert data["state"] == "confirmed" and data["confirmed_at"] is not None
    assert [m["state"] for m in data["messages"]] == ["sent"] * 3
    assert [m["delivery_count"] for m in data["messages"]] == [1, 1, 1]

    servers = api.settings.kafka_bootstrap_servers
    first = await read_topic(servers, topics[0], expect=2, settle=0.3)
    second = await read_topic(servers, topics[1], expect=1, settle=0.3)
    assert [header(list(r.headers), "rms-message-id") for r in first] == [
        f"tx-{unique}-m0", f"tx-{unique}-m2"]
    assert [orjson.loads(r.value) for r in second] == [{"n": 1}]
    # published one after another, in the listed order
    stamps = [r.timestamp for r in first] + [second[0].timestamp]
    assert stamps[0] <= stamps[2] <= stamps[1]

    again = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")
    assert again.status_code == 200 and again.json()["state"] == "confirmed"
    events = (await api.client.get(f"/v1/messages/tx-{unique}-m1/events",
                                   headers=orders.headers)).json()["events"]
    assert [e["event"] for e in events] == ["prepared", "confirmed", "published"]
    assert events[1]["detail"] == {"by": "producer", "transaction_id": f"tx-{unique}"}
    cancel = await api.post(orders, f"/v1/transactions/tx-{unique}/cancel")
    assert cancel.status_code == 409, cancel.text
    assert "confirmed" in cancel.json()["detail"]


async def test_cancelled_transaction_is_never_published(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    topic = f"orders.{unique}"
    created = await create(api, orders, body([topic, topic]))
    transaction_id = created["transaction_id"]
    assert len(transaction_id) == 26  # generated, like a message id

    cancelled = await api.post(orders, f"/v1/transactions/{transaction_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    assert [m["state"] for m in cancelled.json()["messages"]] == ["deleted", "deleted"]
    refused = await api.post(orders, f"/v1/transactions/{transaction_id}/confirm")
    assert refused.status_code == 409
    assert refused.headers["content-type"] == "application/problem+json"
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=1.5) == []


async def test_idempotent_retries_and_conflicts(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    other = await api.create_app("audit")
    topic = f"orders.{unique}"
    first = await create(api, orders, body([topic, topic], f"tx-{unique}"))

    assert await create(api, orders, body([topic, topic], f"tx-{unique}"), 200) == first
    # items without ids match the stored messages at their places
    unnamed = body([topic, topic], f"tx-{unique}")
    for item in unnamed["messages"]:
        del item["message_id"]
    assert await create(api, orders, unnamed, 200) == first

    changed = body([topic, topic], f"tx-{unique}")
    changed["messages"][1]["payload"] = {"n": 99}
    conflict = await create(api, orders, changed, 409)
    assert "different content" in conflict["detail"]
    fewer = await create(api, orders, body([topic], f"tx-{unique}") | {
        "messages": changed["messages"][:1]}, 409)
    assert fewer["status"] == 409

    elsewhere = body([topic], f"tx2-{unique}")
    elsewhere["messages"][0]["message_id"] = f"tx-{unique}-m1"  # already in the first one
    taken = await create(api, orders, elsewhere, 409)
    assert f"tx-{unique}-m1" in taken["detail"]
    missing = await api.client.get(f"/v1/transactions/tx2-{unique}", headers=orders.headers)
    assert missing.status_code == 404  # nothing of it was stored

    assert (await create(api, other, body([topic, topic], f"tx-{unique}"), 409))["status"] == 409
    for path in (f"/v1/transactions/tx-{unique}", f"/v1/transactions/tx-{unique}/confirm",
                 f"/v1/transactions/tx-{unique}/cancel"):
        method = api.client.get if not path.endswith(("confirm", "cancel")) else api.client.post
        response = await method(path, headers=other.headers)
        assert response.status_code == 404, path
    assert (await api.client.get(f"/v1/transactions/tx-{unique}", headers=orders.headers)
            ).json()["state"] == "pending"


async def test_a_single_prepare_reusing_a_members_id_is_409_even_with_its_content(
        api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    topic = f"orders.{unique}"
    stored = await create(api, orders, body([topic], f"tx-{unique}"))
    member = stored["messages"][0]
    same = {"message_id": member["message_id"], "topic": topic, "payload": member["payload"],
            "check_url": CHECK_URL}
    for path, request in (("/v1/messages", same), ("/v1/messages/send", same),
                          ("/v1/messages/batch", {"messages": [same]})):
        response = await api.post(orders, path, json=request)
        assert response.status_code == 409, (path, response.text)
        assert f"tx-{unique}" in response.json()["detail"]
    again = await api.client.get(f"/v1/transactions/tx-{unique}", headers=orders.headers)
    assert again.json() == stored


async def test_a_member_cannot_be_confirmed_or_cancelled_alone(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    topic = f"orders.{unique}"
    await create(api, orders, body([topic, topic], f"tx-{unique}"))
    member = f"tx-{unique}-m0"
    alone = await api.prepared_id(orders, topic, message_id=f"alone-{unique}")

    for action in ("confirm", "cancel"):
        response = await api.post(orders, f"/v1/messages/{member}/{action}")
        assert response.status_code == 409, response.text
        problem = response.json()
        assert problem["type"].endswith("part-of-transaction")
        assert problem["transaction_id"] == f"tx-{unique}"
        assert problem["current_state"] == "pending-send"
        admin = await api.client.post(f"/v1/admin/messages/{member}/{action}",
                                      headers=api.admin)
        assert admin.status_code == 409 and admin.json()["transaction_id"] == f"tx-{unique}"
        batch = await api.post(orders, f"/v1/messages/batch/{action}",
                               json={"message_ids": [alone, member]})
        assert batch.status_code == 409
        assert batch.json()["detail"].startswith("message_ids[1]:")
        assert f"tx-{unique}" in batch.json()["detail"]

    view = (await api.client.get(f"/v1/transactions/tx-{unique}", headers=orders.headers)).json()
    assert [m["state"] for m in view["messages"]] == ["pending-send"] * 2
    assert (await api.client.get(f"/v1/messages/{alone}", headers=orders.headers)
            ).json()["state"] == "pending-send"  # the batch rolled back as a whole


async def test_concurrent_confirm_and_cancel_one_wins_for_all(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    topic = f"orders.{unique}"
    for round_ in range(6):
        transaction_id = f"tx-{unique}-{round_}"
        await create(api, orders, body([topic] * 4, transaction_id))
        answers = await asyncio.gather(*(
            api.post(orders, f"/v1/transactions/{transaction_id}/{action}")
            for action in ("confirm", "cancel", "confirm", "cancel")))
        final = (await api.client.get(f"/v1/transactions/{transaction_id}",
                                      headers=orders.headers)).json()
        states = {m["state"] for m in final["messages"]}
        if final["state"] == "confirmed":
            assert states == {"sent"}
            winners = {"confirm"}
        else:
            assert final["state"] == "cancelled" and states == {"deleted"}
            winners = {"cancel"}
        for action, answer in zip(("confirm", "cancel", "confirm", "cancel"), answers,
                                  strict=True):
            assert answer.status_code == (200 if action in winners else 409), answer.text
        for member in final["messages"]:
            events = (await api.client.get(f"/v1/messages/{member['message_id']}/events",
                                           headers=orders.headers)).json()["events"]
            changes = [e["event"] for e in events if e["event"] in ("confirmed", "cancelled")]
            assert len(changes) == 1


async def test_concurrent_prepares_and_confirms_each_get_their_own_answer(
        api: Api, unique: str) -> None:
    """Concurrent requests share statements (group commit), yet each gets its own answer: new
    transactions are stored whole, a repeated id once, and a transaction reusing a message id
    (taken before, or by another transaction written at the same time) stores nothing."""
    orders = await api.create_app("orders")
    topic = f"orders.{unique}"
    await create(api, orders, body([topic], f"old-{unique}"))
    fresh = [body([topic] * 3, f"tx{n}-{unique}") for n in range(20)]
    repeated = [body([topic] * 2, f"twice-{unique}") for _ in range(6)]
    reusing = body([topic] * 2, f"reuse-{unique}")
    reusing["messages"][1]["message_id"] = f"old-{unique}-m0"
    clashing = [body([topic] * 2, f"clash{n}-{unique}") for n in range(2)]
    for clash in clashing:
        clash["messages"][1]["message_id"] = f"clash-{unique}"
    requests = [*fresh, *repeated, reusing, *clashing]
    responses = await asyncio.gather(*(api.post(orders, "/v1/transactions", json=b)
                                       for b in requests))
    codes = [r.status_code for r in responses]
    assert codes[:20] == [201] * 20
    assert Counter(codes[20:26]) == {201: 1, 200: 5}
    assert len({r.content for r in responses[20:26]}) == 1
    assert codes[26] == 409 and f"messages[1]: message id 'old-{unique}-m0'" in (
        responses[26].json()["detail"])
    assert sorted(codes[27:]) == [201, 409]
    for sent, answer in zip(fresh, responses[:20], strict=True):
        assert [m["message_id"] for m in answer.json()["messages"]] == [
            m["message_id"] for m in sent["messages"]]
    loser = clashing[codes[27:].index(409)]["transaction_id"]
    for path in (f"/v1/transactions/reuse-{unique}", f"/v1/messages/reuse-{unique}-m0",
                 f"/v1/transactions/{loser}", f"/v1/messages/{loser}-m0"):
        missing = await api.client.get(path, headers=orders.headers)
        assert missing.status_code == 404, path  # nothing of it was stored

    ids = [b["transaction_id"] for b in fresh] + [f"twice-{unique}"] * 2
    confirms = await asyncio.gather(*(api.post(orders, f"/v1/transactions/{t}/confirm")
                                      for t in ids))
    assert [c.status_code for c in confirms] == [200] * len(ids)
    for transaction_id, answer in zip(ids, confirms, strict=True):
        data = answer.json()
        assert data["transaction_id"] == transaction_id and data["state"] == "confirmed"
        assert [m["message_id"] for m in data["messages"]] == [
            f"{transaction_id}-m{n}" for n in range(len(data["messages"]))]
        assert [m["state"] for m in data["messages"]] == ["sent"] * len(data["messages"])
    for member in (f"tx0-{unique}-m2", f"twice-{unique}-m1"):
        history = (await api.client.get(f"/v1/messages/{member}/events",
                                        headers=orders.headers)).json()["events"]
        assert [e["event"] for e in history] == ["prepared", "confirmed", "published"]


@pytest.mark.parametrize(("payload", "status"), [
    ({"messages": []}, 422),
    ({"messages": [{"topic": "orders.x", "payload": 1, "check_url": CHECK_URL}]}, 422),
    ({"messages": [{"topic": "orders.x", "payload": 1}], "transaction_id": "a b"}, 422),
    ({"messages": [{"topic": "orders.x", "payload": 1}], "transaction_id": ".."}, 422),
    ({"messages": [{"topic": "no such topic", "payload": 1}]}, 422),
    ({"messages": [{"topic": "orders.x"}]}, 422),
    ({"messages": "x"}, 422),
    ({"messages": [{"topic": "orders.x", "payload": 1}], "max_checks": 0}, 422),
    ({"messages": [{"topic": "orders.x", "payload": 1}], "unknown": 1}, 422),
    ({"messages": [{"topic": "billing.x", "payload": 1}]}, 403),
    ({"messages": [{"topic": "orders.x", "payload": 1}, {"topic": "orders.y", "payload": 2,
                                                            "message_id": "same"},
                   {"topic": "orders.x", "payload": 3, "message_id": "same"}]}, 422),
    ({"messages": [{"topic": "orders.x", "payload": 1}],
      "check_url": "http://elsewhere.example/check"}, 422),
])
async def test_bad_input_is_a_problem_document(api: Api, payload: dict[str, Any],
                                               status: int) -> None:
    orders = await api.create_app("orders", produce=["orders.*"])
    response = await api.post(orders, "/v1/transactions",
                              json={"check_url": CHECK_URL} | payload)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == status


async def test_without_check_url_or_app_default(api: Api) -> None:
    orders = await api.create_app("orders")
    response = await api.post(orders, "/v1/transactions",
                              json={"messages": [{"topic": "orders.x", "payload": 1}]})
    assert response.status_code == 422
    assert "check_url is required" in response.json()["detail"]


async def test_unknown_ids_and_admin_resolution(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    topic = f"orders.{unique}"
    assert (await api.post(orders, "/v1/transactions/nope/confirm")).status_code == 404
    assert (await api.client.post("/v1/admin/transactions/nope/cancel",
                                  headers=api.admin)).status_code == 404
    await create(api, orders, body([topic, topic], f"tx-{unique}"))
    no_admin = await api.client.post(f"/v1/admin/transactions/tx-{unique}/confirm",
                                     headers=orders.headers)
    assert no_admin.status_code == 401
    confirmed = await api.client.post(f"/v1/admin/transactions/tx-{unique}/confirm",
                                      headers=api.admin | {"X-RMS-Operator": "ana"})
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["state"] == "confirmed"
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2,
                               settle=0.3)
    assert [header(list(r.headers), "rms-message-id") for r in records] == [
        f"tx-{unique}-m0", f"tx-{unique}-m1"]
    events = (await api.client.get(f"/v1/messages/tx-{unique}-m0/events",
                                   headers=orders.headers)).json()["events"]
    assert events[1]["actor"] == "admin:ana" and events[1]["detail"]["by"] == "admin"
    read = await api.client.get(f"/v1/admin/transactions/tx-{unique}", headers=api.admin)
    assert read.status_code == 200 and read.json()["app"] == "orders"


async def test_item_limit_is_the_batch_limit(small_api: Api) -> None:
    orders = await small_api.create_app("orders")
    items = [{"topic": "orders.x", "payload": n} for n in range(6)]  # the limit is 5
    response = await small_api.post(orders, "/v1/transactions",
                                    json={"check_url": CHECK_URL, "messages": items})
    assert response.status_code == 413, response.text
    big = [{"topic": "orders.x", "payload": "x" * 2000}]  # over RMS_MAX_PAYLOAD_BYTES 1024
    response = await small_api.post(orders, "/v1/transactions",
                                    json={"check_url": CHECK_URL, "messages": big})
    assert response.status_code == 413, response.text
    assert "messages[0]" in response.json()["detail"]


async def test_stats_count_transaction_messages(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    topic = f"orders.{unique}"
    await create(api, orders, body([topic, topic, topic], f"tx-{unique}"))
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    assert stats["totals"]["pending-send"] == 3


async def test_any_json_payload_is_stored_as_given(api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    payloads: list[Any] = [None, "text", 0, [1, {"a": None}], {"deep": {"x": [True, 1.5]}}]
    created = await create(api, orders, {
        "check_url": CHECK_URL, "transaction_id": f"tx-{unique}",
        "messages": [{"topic": f"orders.{unique}", "payload": p, "key": f"k{n}",
                      "headers": {"h": str(n)}} for n, p in enumerate(payloads)]})
    assert [m["payload"] for m in created["messages"]] == payloads
    assert [m["headers"] for m in created["messages"]] == [{"h": str(n)} for n in range(5)]
    assert created == await create(api, orders, {
        "check_url": CHECK_URL, "transaction_id": f"tx-{unique}",
        "messages": [{"topic": f"orders.{unique}", "payload": p, "key": f"k{n}",
                      "headers": {"h": str(n)}} for n, p in enumerate(payloads)]}, 200)


async def test_members_carry_the_requests_trace_context_to_their_records(
        api: Api, unique: str) -> None:
    orders = await api.create_app("orders")
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    topics = [f"orders.{unique}", f"orders.{unique}"]
    response = await api.client.post(
        "/v1/transactions", json=body(topics, f"tx-{unique}"),
        headers=orders.headers | {"traceparent": parent, "tracestate": "shop=1"})
    assert response.status_code == 201, response.text
    for n in range(2):
        member = (await api.client.get(f"/v1/messages/tx-{unique}-m{n}",
                                       headers=orders.headers)).json()
        # the producer's trace (the parent is RMS's prepare span when spans are recorded)
        assert member["traceparent"].split("-")[1] == parent.split("-")[1]
        assert member["tracestate"] == "shop=1"
    confirmed = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    records = await read_topic(api.settings.kafka_bootstrap_servers, topics[0], expect=2)
    trace_ids = [(header(list(r.headers), "traceparent") or "").split("-")[1] for r in records]
    assert trace_ids == [parent.split("-")[1]] * 2


async def test_the_admin_listing_filters_and_pages_every_apps_transactions(
        api: Api, unique: str) -> None:
    from sqlalchemy import text

    from message_service.schemas import TransactionSummary
    from rms.store.database import open_engine

    orders, billing = await api.create_app("orders"), await api.create_app("billing")
    topic = f"orders.{unique}"
    ids = [f"tx{n}-{unique}" for n in range(4)]
    for n, transaction_id in enumerate(ids):
        await create(api, billing if n == 1 else orders, body([topic, topic], transaction_id))
    cancelled = await api.post(orders, f"/v1/transactions/{ids[2]}/cancel")
    assert cancelled.status_code == 200
    engine = open_engine(api.settings.database_url)
    try:  # the check-back gave up on one: it is dead until an operator resolves it
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE transactions SET dead = true, dead_reason = "
                                    "'check-exhausted' WHERE transaction_id = :t"),
                               {"t": ids[3]})
    finally:
        await engine.dispose()

    async def listed(query: str) -> dict[str, Any]:
        response = await api.client.get(f"/v1/admin/transactions{query}", headers=api.admin)
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found

    every = await listed("")
    assert [t["transaction_id"] for t in every["items"]] == ids  # oldest first
    assert every["next_cursor"] is None
    first = every["items"][0]
    TransactionSummary.model_validate(first)
    assert (first["app"], first["state"], first["dead"]) == ("orders", "pending", False)
    assert first["message_ids"] == [f"{ids[0]}-m0", f"{ids[0]}-m1"]
    assert 0 <= first["age_seconds"] < 60 and "messages" not in first
    assert first["created_at"].endswith("Z")

    def names(page: dict[str, Any]) -> list[str]:
        return [t["transaction_id"] for t in page["items"]]

    assert names(await listed("?state=pending&dead=false")) == [ids[0], ids[1]]
    assert names(await listed("?dead=true")) == [ids[3]]
    assert names(await listed("?state=cancelled")) == [ids[2]]
    assert names(await listed("?app=billing")) == [ids[1]]
    pages, cursor = [], ""
    while True:
        page = await listed(f"?limit=1{cursor}")
        pages.extend(names(page))
        if page["next_cursor"] is None:
            break
        cursor = f"&cursor={page['next_cursor']}"
    assert pages == ids

    for bad in ("?state=sent", "?dead=maybe", "?limit=0", "?limit=1001", "?cursor=nonsense"):
        refused = await api.client.get(f"/v1/admin/transactions{bad}", headers=api.admin)
        assert refused.status_code == 422, bad
        assert refused.headers["content-type"].startswith("application/problem+json")
    denied = await api.client.get("/v1/admin/transactions", headers=orders.headers)
    assert denied.status_code == 401
