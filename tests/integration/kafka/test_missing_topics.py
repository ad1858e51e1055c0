"""A cluster that does not create topics on first use (the production setting): a confirm to a
missing topic is answered 200 and stays durably ``sent``; the failed publish is counted with
reason ``topic-missing``, shown in stats, retried without spending the delivery budget, and
published once ``rms topics create`` has made the topic."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.worker import worker_context
from tests.conftest import ADMIN_TOKEN
from tests.integration.redelivery.helpers import events, message, tick_until
from tests.support import Api, eventually, read_topic

ROOT = Path(__file__).resolve().parents[3]


def _failures(reason: str) -> float:
    return REGISTRY.get_sample_value("rms_publish_failures_total", {"reason": reason}) or 0.0


def _create_topics(api: Api, *topics: str) -> str:
    env = os.environ | {"RMS_KAFKA_BOOTSTRAP_SERVERS": api.settings.kafka_bootstrap_servers,
                        "RMS_DATABASE_URL": api.settings.database_url,
                        "RMS_ACK_TOPIC": api.settings.ack_topic}
    done = subprocess.run([sys.executable, "-m", "rms.cli", "topics", "create", *topics],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.timeout(120)
async def test_missing_topic_is_visible_retried_and_published_once_created(
        strict_api: Api, topic: str) -> None:
    api = strict_api
    orders = await api.create_app("orders", produce=[topic, "orders.*"])
    message_id = await api.prepared_id(orders, topic, max_deliveries=1)
    before = _failures("topic-missing")

    response = await api.post(orders, f"/v1/messages/{message_id}/confirm")

    assert response.status_code == 200, response.text
    assert response.json()["state"] == "sent"
    assert _failures("topic-missing") == before + 1
    stored = await message(api, message_id)
    assert stored["delivery_count"] == 0  # the failed publish spent nothing of max_deliveries 1
    failed = [e for e in await events(api, message_id) if e["event"] == "publish-failed"]
    assert failed[0]["detail"]["reason"] == "topic-missing"
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    assert stats["publish_blocked"] == [{
        "app": "orders", "topic": topic, "reason": "topic-missing", "messages": 1,
        "oldest_confirmed_age_seconds": stats["publish_blocked"][0]["oldest_confirmed_age_seconds"]}]

    async with worker_context(api.settings, "recovery-worker") as context:
        worker = from_context(context)
        await worker.tick()  # still missing: retried, fails fast, still nothing spent
        assert (await message(api, message_id))["delivery_count"] == 0

        output = _create_topics(api)  # the app's concrete topic and the ack topic

        assert f"{topic} " in output and "created" in output
        assert api.settings.ack_topic in output

        async def published() -> bool:
            return bool((await message(api, message_id))["delivery_count"] == 1)

        await tick_until(worker, published, timeout=30, interval=0.2)

    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1, settle=0.5)
    assert [r.headers for r in records] and len(records) == 1
    stats = (await api.client.get("/v1/admin/stats", headers=api.admin)).json()
    assert stats["publish_blocked"] == []
    assert "exists" in _create_topics(api)  # idempotent


def test_topics_command_names_an_unreachable_cluster_in_one_line() -> None:
    env = os.environ | {"RMS_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    done = subprocess.run([sys.executable, "-m", "rms.cli", "topics", "create", "--no-apps", "x"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 1
    assert done.stderr.startswith("rms topics: Kafka at 127.0.0.1:1:")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.timeout(120)
async def test_a_missing_ack_topic_is_reported_until_created(
        settings: Settings, strict_broker: EmbeddedKafka, topic: str) -> None:
    from message_service.app import create_app
    from tests.support import produce

    local = settings.model_copy(update={
        "kafka_bootstrap_servers": strict_broker.bootstrap_servers,
        "kafka_publish_timeout_seconds": 2.0})
    app = create_app(local)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="http://rms.test") as client):
        api = Api(client, ADMIN_TOKEN, local)

        def missing() -> float:
            return REGISTRY.get_sample_value("rms_ack_topic_missing") or 0.0

        await eventually_true(lambda: missing() == 1.0, timeout=30)
        orders = await api.create_app("orders", produce=[topic], consume=["none"])
        points = await api.create_app("points", produce=["none"], consume=[topic])
        _create_topics(api, topic)  # the app's topic and the ack topic
        message_id = await api.prepared_id(orders, topic)
        assert (await api.post(orders, f"/v1/messages/{message_id}/confirm")).status_code == 200
        await produce(local.kafka_bootstrap_servers, local.ack_topic,
                      [await api.ack_body(orders, message_id, "points")],
                      points.signing_secret)

        async def done() -> bool:
            return bool((await message(api, message_id))["state"] == "done")

        await eventually_true(lambda: missing() == 0.0, timeout=60)
        await eventually(done, timeout=60)


async def eventually_true(check: Callable[[], bool], timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.2)
