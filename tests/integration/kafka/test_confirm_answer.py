"""When a producer's confirm is answered (``RMS_CONFIRM_ANSWER``, design section 4):
``published`` answers once the broker's answer to the first publish is recorded, so the answer
states what the broker did; ``committed`` answers once the confirm is durable and states the
delivery it reserved, the publish following on the dispatcher, which records the broker's
answer as it would have. Both against a broker that creates no topic on first use (a missing
topic is a refusal) and one topic that exists (an accepted publish)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx
import pytest

from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.conftest import ADMIN_TOKEN
from tests.integration.redelivery.helpers import message
from tests.support import Api, create_topic, eventually, read_topic

Answer = Literal["published", "committed"]


@asynccontextmanager
async def _api(settings: Settings, broker: EmbeddedKafka, answer: Answer) -> AsyncIterator[Api]:
    from message_service.app import create_app

    local = settings.model_copy(update={
        "kafka_bootstrap_servers": broker.bootstrap_servers, "confirm_answer": answer,
        "kafka_publish_timeout_seconds": 2.0, "publish_retry_seconds": 0.5,
        "ack_consumer_enabled": False})
    app = create_app(local)
    async with (app.router.lifespan_context(app),
                httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                  base_url="http://rms.test") as client):
        yield Api(client, ADMIN_TOKEN, local)


async def _events(api: Api, message_id: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = await api.client.get(f"/v1/messages/{message_id}/events", headers=headers)
    events: list[dict[str, Any]] = response.json()["events"]
    return events


@pytest.mark.timeout(120)
@pytest.mark.parametrize("answer", ["published", "committed"])
async def test_a_refused_publish_is_in_the_answer_only_when_it_waits_for_the_broker(
        settings: Settings, strict_broker: EmbeddedKafka, topic: str, answer: Answer) -> None:
    async with _api(settings, strict_broker, answer) as api:
        orders = await api.create_app("orders")
        message_id = await api.prepared_id(orders, topic)  # the topic does not exist

        answered = (await api.post(orders, f"/v1/messages/{message_id}/confirm")).json()

        assert answered["state"] == "sent"
        if answer == "published":
            assert (answered["delivery_count"], answered["publish_failure"]) == (
                0, "topic-missing")
        else:  # the delivery the confirm reserved, its outcome not known yet
            assert (answered["delivery_count"], answered["publish_failure"]) == (1, None)

        async def recorded() -> dict[str, Any] | None:
            stored = await message(api, message_id)
            return stored if stored["publish_failure"] is not None else None
        stored = await eventually(recorded)
        assert (stored["delivery_count"], stored["publish_failure"]) == (0, "topic-missing")
        events = [e["event"] for e in await _events(api, message_id, orders.headers)]
        assert events[:3] == ["prepared", "confirmed", "publish-failed"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("answer", ["published", "committed"])
async def test_an_accepted_publish_is_recorded_and_on_the_topic_either_way(
        settings: Settings, strict_broker: EmbeddedKafka, topic: str, answer: Answer) -> None:
    await create_topic(strict_broker.bootstrap_servers, topic)
    async with _api(settings, strict_broker, answer) as api:
        orders = await api.create_app("orders")
        message_id = await api.prepared_id(orders, topic)

        answered = (await api.post(orders, f"/v1/messages/{message_id}/confirm")).json()

        assert (answered["state"], answered["delivery_count"], answered["publish_failure"]) == (
            "sent", 1, None)
        assert answered["next_delivery_at"] is not None  # the ack deadline

        async def published() -> bool:
            events = await _events(api, message_id, orders.headers)
            return "published" in [e["event"] for e in events]
        await eventually(published)
        again = (await api.post(orders, f"/v1/messages/{message_id}/confirm")).json()
        assert again["delivery_count"] == 1  # a repeat publishes nothing more
    (record,) = await read_topic(strict_broker.bootstrap_servers, topic, expect=1, settle=0.5)
    assert record.key == message_id.encode()


@pytest.mark.timeout(120)
async def test_a_publish_handed_off_is_recorded_before_the_api_stops(
        settings: Settings, strict_broker: EmbeddedKafka, topic: str) -> None:
    """The API's shutdown waits for the publishes its answers handed to the dispatcher."""
    await create_topic(strict_broker.bootstrap_servers, topic)
    async with _api(settings, strict_broker, "committed") as api:
        orders = await api.create_app("orders")
        ids = [await api.prepared_id(orders, topic) for _ in range(5)]
        for message_id in ids:
            response = await api.post(orders, f"/v1/messages/{message_id}/confirm")
            assert response.status_code == 200
    async with _api(settings, strict_broker, "published") as reader:
        for message_id in ids:
            events = await _events(reader, message_id, orders.headers)
            assert [e["event"] for e in events] == ["prepared", "confirmed", "published"]
