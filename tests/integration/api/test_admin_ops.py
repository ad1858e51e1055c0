"""Operator endpoints: listing with filters and cursor, stats, resolution by hand, resend."""

from __future__ import annotations

import base64

from tests.integration.api.helpers import assert_problem, events, state_of, stored
from tests.support import Api, read_topic


async def test_list_filters(api: Api, topic: str) -> None:
    one = await api.create_app("one")
    two = await api.create_app("two")
    pending = await api.prepared_id(one, topic)
    sent = await api.prepared_id(one, topic + ".b")
    assert (await api.post(one, f"/v1/messages/{sent}/confirm")).status_code == 200
    other = await api.prepared_id(two, topic)

    async def ids(**params: object) -> list[str]:
        return [m["message_id"] for m in await stored(api, **params)]

    assert await ids() == [pending, sent, other]
    assert await ids(state="pending-send") == [pending, other]
    assert await ids(state="sent") == [sent]
    assert await ids(state="done") == []
    assert await ids(dead="false") == [pending, sent, other]
    assert await ids(dead="true") == []
    assert await ids(topic=topic) == [pending, other]
    assert await ids(app="two") == [other]
    assert await ids(app="one", state="sent", topic=topic + ".b") == [sent]
    response = await api.client.get("/v1/admin/messages", headers=api.admin,
                                    params={"state": "bogus"})
    assert_problem(response, 422)
    for limit in (0, 1001, "x"):
        response = await api.client.get("/v1/admin/messages", headers=api.admin,
                                        params={"limit": limit})
        assert_problem(response, 422)


async def test_cursor_paging(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    created = [await api.prepared_id(app, topic, message_id=f"p{n}") for n in (5, 3, 6, 1, 0,
                                                                               2, 4)]
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        response = await api.client.get("/v1/admin/messages", headers=api.admin, params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append([m["message_id"] for m in body["items"]])
        cursor = body["next_cursor"]
        if cursor is None:
            break
        assert len(pages) < 5
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [m for page in pages for m in page] == created  # oldest first, no duplicates


async def test_bad_cursor_is_422(api: Api) -> None:
    bad = ["not-a-cursor!", "", "abc",
           base64.urlsafe_b64encode(b'{"a": 1}').decode(),
           base64.urlsafe_b64encode(b'["x"]').decode(),
           base64.urlsafe_b64encode(b"[1, 2]").decode(),
           base64.urlsafe_b64encode(b'["not a date", "m"]').decode()]
    for cursor in bad:
        response = await api.client.get("/v1/admin/messages", headers=api.admin,
                                        params={"cursor": cursor})
        assert response.status_code < 500, (cursor, response.text)
        assert_problem(response, 422)


async def test_stats(api: Api, topic: str) -> None:
    empty = await api.client.get("/v1/admin/stats", headers=api.admin)
    assert empty.status_code == 200, empty.text
    assert empty.json()["groups"] == []
    assert empty.json()["oldest_pending_send_age_seconds"] is None
    assert empty.json()["oldest_unacked_age_seconds"] is None
    assert set(empty.json()["totals"].values()) == {0}

    one = await api.create_app("one")
    two = await api.create_app("two")
    await api.prepared_id(one, topic)
    await api.prepared_id(one, topic)
    sent = await api.prepared_id(one, topic)
    assert (await api.post(one, f"/v1/messages/{sent}/confirm")).status_code == 200
    gone = await api.prepared_id(two, topic)
    assert (await api.post(two, f"/v1/messages/{gone}/cancel")).status_code == 200

    response = await api.client.get("/v1/admin/stats", headers=api.admin)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["totals"] == {"pending-send": 2, "sent": 1, "done": 0, "deleted": 1, "dead": 0,
                              "scheduled": 0}
    groups = {(g["app"], g["topic"]): g for g in body["groups"]}
    assert set(groups) == {("one", topic), ("two", topic)}
    assert groups[("one", topic)]["counts"] == {"pending-send": 2, "sent": 1, "dead": 0,
                                                "scheduled": 0}
    assert groups[("two", topic)]["counts"] == {"deleted": 1, "dead": 0, "scheduled": 0}
    assert groups[("one", topic)]["oldest_pending_send_age_seconds"] >= 0
    assert groups[("one", topic)]["oldest_unacked_age_seconds"] >= 0
    assert groups[("two", topic)]["oldest_pending_send_age_seconds"] is None
    assert body["oldest_pending_send_age_seconds"] >= 0
    assert body["oldest_unacked_age_seconds"] >= 0


async def test_admin_confirm_and_cancel(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    first = await api.prepared_id(app, topic)
    second = await api.prepared_id(app, topic)
    confirmed = await api.client.post(f"/v1/admin/messages/{first}/confirm", headers=api.admin)
    assert confirmed.status_code == 200, confirmed.text
    assert confirmed.json()["state"] == "sent"
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert [dict(r.headers)["rms-message-id"].decode() for r in records] == [first]
    history = await events(api, first)
    assert [e["event"] for e in history] == ["prepared", "confirmed", "published"]
    assert history[1]["actor"] == "admin"

    cancelled = await api.client.post(f"/v1/admin/messages/{second}/cancel", headers=api.admin)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "deleted"
    assert (await events(api, second))[-1]["actor"] == "admin"
    # illegal by hand too
    again = await api.client.post(f"/v1/admin/messages/{second}/confirm", headers=api.admin)
    assert assert_problem(again, 409)["current_state"] == "deleted"
    again = await api.client.post(f"/v1/admin/messages/{first}/cancel", headers=api.admin)
    assert assert_problem(again, 409)["current_state"] == "sent"


async def test_admin_resend(api: Api, topic: str) -> None:
    app = await api.create_app("producer")
    message_id = await api.prepared_id(app, topic)
    pending = await api.client.post(f"/v1/admin/messages/{message_id}/resend",
                                    headers=api.admin)
    assert assert_problem(pending, 409)["current_state"] == "pending-send"
    assert (await api.post(app, f"/v1/messages/{message_id}/confirm")).status_code == 200
    resent = await api.client.post(f"/v1/admin/messages/{message_id}/resend", headers=api.admin)
    assert resent.status_code == 200, resent.text
    assert resent.json()["state"] == "sent"
    assert resent.json()["delivery_count"] == 2
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2)
    assert [dict(r.headers)["rms-delivery"] for r in records] == [b"1", b"2"]
    assert {dict(r.headers)["rms-message-id"] for r in records} == {message_id.encode()}
    names = [e["event"] for e in await events(api, message_id)]
    assert names == ["prepared", "confirmed", "published", "resent", "published"]
    # a done message cannot be resent
    assert (await api.post(app, f"/v1/messages/{message_id}/ack")).status_code == 200
    done = await api.client.post(f"/v1/admin/messages/{message_id}/resend", headers=api.admin)
    assert assert_problem(done, 409)["current_state"] == "done"


async def test_admin_reads_any_apps_message(api: Api, topic: str) -> None:
    one = await api.create_app("one")
    two = await api.create_app("two")
    first = await api.prepared_id(one, topic)
    second = await api.prepared_id(two, topic)
    for message_id, owner in ((first, "one"), (second, "two")):
        response = await api.client.get(f"/v1/admin/messages/{message_id}", headers=api.admin)
        assert response.status_code == 200, response.text
        assert response.json()["app"] == owner
        assert await state_of(api, message_id) == "pending-send"
        assert [e["event"] for e in await events(api, message_id)] == ["prepared"]
