"""Operator tools (admin token): bulk dead-letter resend with filters, limit and dry run; admin
confirm/cancel of a dead pending-send; stats; every action recorded with its actor."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from rms.usecases.redelivery import RedeliveryWorker
from tests.integration.redelivery.helpers import SqlHelper, deliveries, events, message
from tests.support import Api, read_topic

RESEND = "/v1/admin/dead-letters/resend"


@pytest.fixture
async def dead_letters(api: Api, sql: SqlHelper, unique: str) -> dict[str, list[str]]:
    """Dead sent messages in three (app, topic) groups, oldest group first, plus a live sent
    message and a dead pending-send that a bulk resend must never touch."""
    await api.create_app("one")
    await api.create_app("two")
    alpha, beta = f"alpha.{unique}", f"beta.{unique}"
    seeded = {
        "one-alpha": await sql.seed_sent("one", alpha, 3, prefix="a"),
        "one-beta": await sql.seed_sent("one", beta, 2, prefix="b"),
        "two-alpha": await sql.seed_sent("two", alpha, 2, prefix="c"),
    }
    for ids in seeded.values():
        await sql.make_dead(ids)
    seeded["live"] = await sql.seed_sent("one", alpha, 1, prefix="d", due=False)
    pending = await api.prepared_id(api.apps["one"], alpha, message_id="e-1")
    await sql.make_dead([pending], reason="check-exhausted")
    seeded["dead-pending"] = [pending]
    seeded["topics"] = [alpha, beta]
    return seeded


async def _resend(api: Api, operator: str | None = None, **body: Any) -> dict[str, Any]:
    headers = api.admin | ({"X-RMS-Operator": operator} if operator else {})
    response = await api.client.post(RESEND, json=body, headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert result["count"] == len(result["messages"])
    return result


def _ids(result: dict[str, Any]) -> list[str]:
    return [m["message_id"] for m in result["messages"]]


async def test_dry_run_shows_exactly_what_would_be_resent_and_changes_nothing(
        api: Api, dead_letters: dict[str, list[str]]) -> None:
    alpha = dead_letters["topics"][0]
    everything = await _resend(api, limit=1000, dry_run=True)
    assert everything["dry_run"] is True
    assert _ids(everything) == (dead_letters["one-alpha"] + dead_letters["one-beta"]
                                + dead_letters["two-alpha"])
    assert _ids(await _resend(api, app="one", topic=alpha, limit=10, dry_run=True)) == (
        dead_letters["one-alpha"])
    assert _ids(await _resend(api, topic=alpha, limit=4, dry_run=True)) == (
        dead_letters["one-alpha"] + dead_letters["two-alpha"][:1])
    assert _ids(await _resend(api, app="two", limit=1, dry_run=True)) == (
        dead_letters["two-alpha"][:1])
    assert _ids(await _resend(api, app="nobody", limit=5, dry_run=True)) == []
    for message_id in _ids(everything):
        stored = await message(api, message_id)
        assert (stored["dead"], stored["delivery_count"]) == (True, 1)
    assert await read_topic(api.settings.kafka_bootstrap_servers, alpha, expect=1,
                            timeout=0.5) == []


async def test_resend_applies_filters_and_limit_and_records_the_operator(
        api: Api, dead_letters: dict[str, list[str]]) -> None:
    alpha, beta = dead_letters["topics"]
    first = await _resend(api, operator="alice", app="one", limit=2)
    assert first["dry_run"] is False
    assert _ids(first) == dead_letters["one-alpha"][:2]
    for resent in first["messages"]:
        assert (resent["dead"], resent["dead_reason"], resent["delivery_count"]) == (
            False, None, 2)
        history = await events(api, resent["message_id"])
        assert [(e["event"], e["actor"], e["detail"]) for e in history] == [
            ("resent", "admin:alice", {"delivery": 2}),
            ("published", "admin:alice", {"delivery": 2})]

    second = await _resend(api, topic=alpha, limit=1000)
    assert _ids(second) == dead_letters["one-alpha"][2:] + dead_letters["two-alpha"]
    assert (await events(api, _ids(second)[0]))[0]["actor"] == "admin"
    assert (await _resend(api, topic=alpha, limit=1000))["count"] == 0

    records = await read_topic(api.settings.kafka_bootstrap_servers, alpha, expect=5, settle=0.3)
    assert deliveries(records) == {
        (message_id, 2): 1 for message_id in dead_letters["one-alpha"] + dead_letters["two-alpha"]}
    for untouched in dead_letters["one-beta"]:
        assert (await message(api, untouched))["dead"] is True
    pending = await message(api, dead_letters["dead-pending"][0])
    assert (pending["state"], pending["dead"]) == ("pending-send", True)
    live = await message(api, dead_letters["live"][0])
    assert live["delivery_count"] == 1
    assert await read_topic(api.settings.kafka_bootstrap_servers, beta, expect=1,
                            timeout=0.5) == []


async def test_bulk_resend_validates_its_body_and_needs_the_admin_token(api: Api) -> None:
    app = await api.create_app("one")
    for body in ({}, {"limit": 0}, {"limit": 1001}, {"limit": "5"}, {"limit": 5, "other": 1},
                 {"limit": 5, "topic": "no spaces"}):
        response = await api.client.post(RESEND, json=body, headers=api.admin)
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
    assert (await api.client.post(RESEND, json={"limit": 5})).status_code == 401
    assert (await api.post(app, RESEND, json={"limit": 5})).status_code == 401
    bad_operator = await api.client.post(
        RESEND, json={"limit": 5}, headers=api.admin | {"X-RMS-Operator": "a b"})
    assert bad_operator.status_code == 422


async def test_admin_confirm_and_cancel_resolve_a_dead_pending_send(
        api: Api, sql: SqlHelper, topic: str) -> None:
    producer = await api.create_app("orders")
    committed = await api.prepared_id(producer, topic)
    rolled_back = await api.prepared_id(producer, topic)
    await sql.make_dead([committed, rolled_back], reason="check-exhausted")
    operator = api.admin | {"X-RMS-Operator": "bob"}

    confirmed = await api.client.post(f"/v1/admin/messages/{committed}/confirm", headers=operator)
    assert confirmed.status_code == 200, confirmed.text
    assert (confirmed.json()["state"], confirmed.json()["dead"]) == ("sent", False)
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1)
    assert deliveries(records) == {(committed, 1): 1}
    history = await events(api, committed)
    assert [(e["event"], e["actor"]) for e in history] == [
        ("prepared", "app:orders"), ("confirmed", "admin:bob"), ("published", "app:orders")]
    assert history[1]["detail"] == {"by": "admin"}

    cancelled = await api.client.post(f"/v1/admin/messages/{rolled_back}/cancel",
                                      headers=operator)
    assert (cancelled.json()["state"], cancelled.json()["dead"]) == ("deleted", False)
    assert (await events(api, rolled_back))[-1]["actor"] == "admin:bob"


async def test_single_resend_records_the_delivery_and_the_operator(
        api: Api, sql: SqlHelper, topic: str) -> None:
    producer = await api.create_app("orders")
    message_id = await api.prepared_id(producer, topic)
    await api.post(producer, f"/v1/messages/{message_id}/confirm")
    await sql.make_dead([message_id])
    response = await api.client.post(f"/v1/admin/messages/{message_id}/resend",
                                     headers=api.admin | {"X-RMS-Operator": "carol"})
    assert (response.json()["dead"], response.json()["delivery_count"]) == (False, 2)
    resent = [e for e in await events(api, message_id) if e["event"] == "resent"]
    assert [(e["actor"], e["detail"]) for e in resent] == [("admin:carol", {"delivery": 2})]


async def test_stats_per_app_and_topic_and_the_unacked_gauge(
        api: Api, worker: RedeliveryWorker, dead_letters: dict[str, list[str]]) -> None:
    alpha, beta = dead_letters["topics"]
    response = await api.client.get("/v1/admin/stats", headers=api.admin)
    assert response.status_code == 200
    body = response.json()
    groups = {(g["app"], g["topic"]): g for g in body["groups"]}
    assert groups[("one", alpha)]["counts"] == {"sent": 4, "pending-send": 1, "dead": 4,
                                                  "scheduled": 0}
    assert groups[("one", beta)]["counts"] == {"sent": 2, "dead": 2, "scheduled": 0}
    assert groups[("two", alpha)]["counts"] == {"sent": 2, "dead": 2, "scheduled": 0}
    # dead messages wait for an operator, not for an ack: only the live ones have ages
    assert groups[("one", alpha)]["oldest_unacked_age_seconds"] >= 0
    assert groups[("one", alpha)]["oldest_pending_send_age_seconds"] is None
    assert groups[("two", alpha)]["oldest_unacked_age_seconds"] is None
    assert body["totals"]["dead"] == 8
    await worker.tick()
    gauge = REGISTRY.get_sample_value("rms_oldest_unacked_age_seconds")
    assert gauge is not None and gauge >= 0
