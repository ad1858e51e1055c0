"""When each consumer app last had an ack recorded (design section 4, stats ``consumers``):
acks over HTTP and over the ack topic (a real broker) set it, a repeat does not move it, an app
with none shows null and counts its silence from its registration, and ``/metrics`` shows the
same as ``rms_consumer_seconds_since_ack``."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from rms_client.ack_records import ack_value, signed_ack_headers
from tests.support import Api, AppKeys, eventually, write_records


async def _sent(api: Api, producer: AppKeys, topic: str) -> str:
    message_id = await api.prepared_id(producer, topic)
    assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return message_id


async def _consumers(api: Api) -> dict[str, dict[str, Any]]:
    response = await api.client.get("/v1/admin/stats", headers=api.admin)
    assert response.status_code == 200, response.text
    return {c["consumer"]: c for c in response.json()["consumers"]}


async def _ack(api: Api, consumer: AppKeys, message_id: str) -> str:
    response = await api.post(consumer, f"/v1/messages/{message_id}/ack")
    assert response.status_code == 200, response.text
    return response.headers["RMS-Ack"]


def _gauge(text: str, consumer: str) -> float | None:
    found = re.search(rf'^rms_consumer_seconds_since_ack{{consumer="{consumer}"}} (\S+)$', text,
                      re.MULTILINE)
    return float(found.group(1)) if found else None


async def test_last_ack_per_consumer_in_stats_and_metrics(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    invoices = await api.create_app("invoices", produce=["none"], consume=[topic])
    first, second = await _sent(api, producer, topic), await _sent(api, producer, topic)

    before = await _consumers(api)
    assert set(before) == {"points", "invoices"}
    for row in before.values():
        assert row["unacked"] == 2 and row["last_ack_at"] is None
        assert row["seconds_since_ack"] is not None and row["seconds_since_ack"] >= 0

    assert await _ack(api, points, first) == "recorded"
    after_http = await _consumers(api)
    points_at = after_http["points"]["last_ack_at"]
    assert points_at is not None and after_http["points"]["unacked"] == 1
    assert after_http["points"]["seconds_since_ack"] < after_http["invoices"]["seconds_since_ack"]
    assert after_http["invoices"]["last_ack_at"] is None

    assert await _ack(api, points, first) == "repeated"  # records nothing: the time stays
    assert (await _consumers(api))["points"]["last_ack_at"] == points_at
    shown = (await api.client.get("/v1/admin/apps/points", headers=api.admin)).json()
    assert shown["last_ack_at"] == points_at  # the admin view of the app shows it too

    created_at = (await api.client.get(f"/v1/admin/messages/{first}",
                                       headers=api.admin)).json()["created_at"]
    value = ack_value(first, invoices.name, created_at)
    await write_records(api.settings.kafka_bootstrap_servers, api.settings.ack_topic,
                        [(value, signed_ack_headers([invoices.signing_secret], value))])

    async def invoices_acked() -> dict[str, Any] | None:
        row = (await _consumers(api))["invoices"]
        return row if row["last_ack_at"] is not None else None

    over_topic = await eventually(invoices_acked, timeout=20)
    assert datetime.fromisoformat(over_topic["last_ack_at"]) >= datetime.fromisoformat(points_at)

    metrics = (await api.client.get("/metrics")).text
    assert _gauge(metrics, "points") is not None and _gauge(metrics, "invoices") is not None
    assert second  # both still owe it: both stay listed and measured


async def test_a_consumer_that_owes_nothing_is_not_measured(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=[topic])
    message_id = await _sent(api, producer, topic)
    assert _gauge((await api.client.get("/metrics")).text, "points") is not None
    assert await _ack(api, points, message_id) == "recorded"
    assert await _consumers(api) == {}
    assert _gauge((await api.client.get("/metrics")).text, "points") is None
