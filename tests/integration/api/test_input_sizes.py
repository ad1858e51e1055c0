"""Every input that lands in an index is bounded so that its index row fits (design section 4):
a key over 1,024 bytes is refused at prepare, and every indexed input at its largest still
goes through prepare, confirm and the admin routes without a 500."""

from __future__ import annotations

from typing import Any

from tests.integration.api.helpers import assert_problem, stored
from tests.support import CHECK_PREFIX, Api

WIDE = "\U0001d11e"  # four bytes in UTF-8


def _body(topic: str, **fields: Any) -> dict[str, Any]:
    return {"topic": topic, "payload": {"n": 1}, "check_url": CHECK_PREFIX + "check"} | fields


async def _ordered_app(api: Api, name: str) -> Any:
    app = await api.create_app(name)
    response = await api.client.put(f"/v1/admin/apps/{name}/ordered-topics",
                                    json={"ordered_topics": ["*"]}, headers=api.admin)
    assert response.status_code == 200, response.text
    return app


async def test_a_key_over_1024_bytes_is_422_on_every_route(api: Api, topic: str) -> None:
    app = await _ordered_app(api, "producer")
    long_key = WIDE * 1000  # 1,000 characters (within 1,024), 4,000 bytes
    for path, body in (
        ("/v1/messages", _body(topic, key=long_key)),
        ("/v1/messages/send", _body(topic, key=long_key)),
        ("/v1/messages/batch", {"messages": [_body(topic, key=long_key)]}),
        ("/v1/transactions", {"check_url": CHECK_PREFIX + "check",
                              "messages": [{"topic": topic, "key": long_key, "payload": 1}]}),
    ):
        response = await api.post(app, path, json=body)
        assert_problem(response, 422, contains="1024 bytes")
    over_by_one = "a" * 1021 + WIDE  # 1,022 characters, 1,025 bytes
    assert_problem(await api.prepare(app, topic, key=over_by_one), 422, contains="1025 bytes")
    assert await stored(api) == []


async def test_every_indexed_input_at_its_largest_is_stored_confirmed_and_listed(
        api: Api) -> None:
    """Ordered keys are indexed with their topic (and app): the largest key on the longest
    topic, with the longest ids and app name, prepares, confirms, resolves and lists."""
    name = "a" * 63
    app = await _ordered_app(api, name)
    topic = "t" * 249
    key = WIDE * 256  # 1,024 bytes
    single = await api.prepare(app, topic, key=key, message_id="m" * 128)
    assert single.status_code == 201, single.text
    confirmed = await api.post(app, f"/v1/messages/{'m' * 128}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    transaction = await api.post(app, "/v1/transactions", json={
        "transaction_id": "x" * 128, "check_url": CHECK_PREFIX + "check",
        "messages": [{"message_id": "n" * 128, "topic": topic, "key": key, "payload": 1},
                     {"topic": topic, "key": "k" * 1024, "payload": 2}]})
    assert transaction.status_code == 201, transaction.text
    resolved = await api.client.post(f"/v1/admin/transactions/{'x' * 128}/confirm",
                                     headers=api.admin)
    assert resolved.status_code == 200, resolved.text
    assert {m["state"] for m in resolved.json()["messages"]} == {"sent"}
    listed = await stored(api, app=name, topic=topic)
    assert len(listed) == 3
    stats = await api.client.get("/v1/admin/stats", headers=api.admin)
    assert stats.status_code == 200, stats.text


async def test_oversized_lookups_are_answered_without_a_500(api: Api, topic: str) -> None:
    """Inputs that are only looked up (filters, path ids) may be any length: never a 500."""
    app = await api.create_app("producer")
    huge = "z" * 10_000
    listing = await api.client.get("/v1/admin/messages", headers=api.admin,
                                   params={"topic": huge, "app": huge})
    assert listing.status_code in (200, 422), listing.text
    for path in (f"/v1/messages/{huge}", f"/v1/transactions/{huge}"):
        response = await api.client.get(path, headers=app.headers)
        assert 400 <= response.status_code < 500, response.text
    unknown_app = await api.client.get(f"/v1/admin/apps/{huge}", headers=api.admin)
    assert 400 <= unknown_app.status_code < 500, unknown_app.text
