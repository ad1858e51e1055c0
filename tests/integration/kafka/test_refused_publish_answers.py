"""A publish the broker refuses is answered as what happened, not as a delivery: every request
that publishes at once (confirm, admin confirm, one-shot send, batch confirm, a transaction's
confirm, admin resend) answers with the message as the outcome was recorded: its delivery
number given back, due again at its retry time, and ``publish_failure`` naming why. A read
right after the answer shows the same. The refusal here is a topic the cluster does not have
(this broker creates none on first use)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from recovery_service.runtime import from_context
from rms.worker import worker_context
from tests.conftest import ADMIN_TOKEN
from tests.integration.redelivery.helpers import message, tick_until
from tests.support import CHECK_PREFIX, Api, AppKeys, create_topic

# the fields that say what the broker took, and when RMS tries again
OUTCOME = ("state", "delivery_count", "next_delivery_at", "publish_failure")


def _outcome(body: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(body[name] for name in OUTCOME)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def _assert_refused(api: Api, answered: dict[str, Any], reason: str) -> None:
    """``answered`` states a refused first publish (due at its retry time, well before an ack
    deadline) and matches the message as stored."""
    assert answered["state"] == "sent"
    assert answered["delivery_count"] == 0, answered
    assert answered["publish_failure"] == reason, answered
    retry = timedelta(seconds=api.settings.publish_retry_seconds + 5)
    assert _at(answered["next_delivery_at"]) <= _at(answered["confirmed_at"]) + retry, answered
    assert _outcome(await message(api, answered["message_id"])) == _outcome(answered)


async def _app(api: Api) -> AppKeys:
    return await api.create_app("orders", produce=["*"], prefixes=[CHECK_PREFIX])


@pytest.mark.timeout(120)
async def test_a_confirm_refused_by_the_broker_answers_the_recorded_outcome(
        strict_api: Api, topic: str) -> None:
    api = strict_api
    orders = await _app(api)
    message_id = await api.prepared_id(orders, topic)

    response = await api.post(orders, f"/v1/messages/{message_id}/confirm")

    assert response.status_code == 200, response.text
    await _assert_refused(api, response.json(), "topic-missing")
    again = await api.post(orders, f"/v1/messages/{message_id}/confirm")  # idempotent repeat
    assert _outcome(again.json()) == _outcome(response.json())

    await create_topic(api.settings.kafka_bootstrap_servers, topic)
    async with worker_context(api.settings, "recovery-worker") as context:
        worker = from_context(context)

        async def published() -> bool:
            return bool((await message(api, message_id))["delivery_count"] == 1)

        await tick_until(worker, published, timeout=30, interval=0.2)
    accepted = await message(api, message_id)
    assert accepted["publish_failure"] is None  # the broker took its retry


@pytest.mark.timeout(120)
async def test_an_admin_confirm_and_a_one_shot_send_refused_answer_the_outcome(
        strict_api: Api, topic: str) -> None:
    api = strict_api
    orders = await _app(api)
    message_id = await api.prepared_id(orders, topic)

    confirmed = await api.client.post(f"/v1/admin/messages/{message_id}/confirm",
                                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    sent = await api.post(orders, "/v1/messages/send", json={
        "topic": topic, "payload": {"n": 2}, "check_url": CHECK_PREFIX + "check"})

    assert confirmed.status_code == 200, confirmed.text
    await _assert_refused(api, confirmed.json(), "topic-missing")
    assert sent.status_code == 201, sent.text
    await _assert_refused(api, sent.json(), "topic-missing")


@pytest.mark.timeout(120)
async def test_a_batch_confirm_answers_each_outcome(strict_api: Api, topic: str) -> None:
    api = strict_api
    orders = await _app(api)
    present = f"{topic}.present"
    await create_topic(api.settings.kafka_bootstrap_servers, present)
    refused = await api.prepared_id(orders, topic)
    accepted = await api.prepared_id(orders, present)

    response = await api.post(orders, "/v1/messages/batch/confirm",
                              json={"message_ids": [refused, accepted]})

    assert response.status_code == 200, response.text
    first, second = response.json()["messages"]
    await _assert_refused(api, first, "topic-missing")
    assert (second["delivery_count"], second["publish_failure"]) == (1, None)
    assert _outcome(await message(api, accepted)) == _outcome(second)


@pytest.mark.timeout(120)
async def test_a_transaction_confirm_answers_every_refused_member(
        strict_api: Api, topic: str, unique: str) -> None:
    """Both members go to the missing topic: their one Kafka transaction never begins, and
    each answers its own refusal."""
    api = strict_api
    orders = await _app(api)
    items = [{"message_id": f"tx-{unique}-m{n}", "topic": topic, "payload": {"n": n}}
             for n in range(2)]
    created = await api.post(orders, "/v1/transactions", json={
        "transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
        "messages": items})
    assert created.status_code == 201, created.text

    response = await api.post(orders, f"/v1/transactions/tx-{unique}/confirm")

    assert response.status_code == 200, response.text
    first, second = response.json()["messages"]
    await _assert_refused(api, first, "topic-missing")
    await _assert_refused(api, second, "topic-missing")


@pytest.mark.timeout(120)
async def test_an_admin_resend_refused_answers_the_outcome(strict_api: Api, topic: str) -> None:
    api = strict_api
    orders = await _app(api)
    message_id = await api.prepared_id(orders, topic)
    await api.post(orders, f"/v1/messages/{message_id}/confirm")

    response = await api.client.post(f"/v1/admin/messages/{message_id}/resend",
                                     headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})

    assert response.status_code == 200, response.text
    await _assert_refused(api, response.json(), "topic-missing")
