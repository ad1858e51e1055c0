"""Acks through the SDK, by HTTP and by the ack topic: duplicates, a topic the app may not
consume (refused), an unknown id, RMS unreachable; and the ack mode is configuration."""

from __future__ import annotations

import re

import orjson
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.kafka.records import header
from rms_client.consumer import AckResult, BatchReport, HttpAcker, RmsConsumer, TopicAcker, make_acker
from tests.integration.sdk_consumer.helpers import consume_until, record_effect, scalar
from tests.support import Api, AppKeys, eventually, read_topic


async def _setup(api: Api, topic: str) -> tuple[AppKeys, AppKeys, AppKeys, list[str]]:
    producer = await api.create_app("orders", produce=["orders.*"], consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    audit = await api.create_app("audit", produce=["none"], consume=["billing.*"])
    ids = []
    for _ in range(3):
        message_id = await api.prepared_id(producer, topic)
        assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
        ids.append(message_id)
    return producer, points, audit, ids


async def _state(api: Api, message_id: str) -> str:
    response = await api.client.get(f"/v1/admin/messages/{message_id}", headers=api.admin)
    return str(response.json()["state"])


async def test_http_acks(api: Api, topic: str) -> None:
    producer, points, audit, (first, second, _) = await _setup(api, topic)
    as_points = HttpAcker(client=api.client, api_key=points.api_key)
    for _ in range(2):  # a duplicate ack is harmless
        ack = await as_points.ack(first)
        assert (ack.result, ack.status) == (AckResult.ACKED, 200)
    assert await _state(api, first) == "done"

    stranger = await HttpAcker(client=api.client, api_key=audit.api_key).ack(second)
    assert (stranger.result, stranger.status) == (AckResult.REFUSED, 404)  # not its business
    owner = await HttpAcker(client=api.client, api_key=producer.api_key).ack(second)
    assert (owner.result, owner.status) == (AckResult.REFUSED, 403)
    assert owner.detail is not None and "consume_topics" in owner.detail
    assert await _state(api, second) == "sent"

    unknown = await as_points.ack("no-such-message")
    assert (unknown.result, unknown.status) == (AckResult.REFUSED, 404)


async def test_http_ack_when_rms_is_unreachable_fails_after_retries() -> None:
    acker = HttpAcker("http://127.0.0.1:1", "key", retries=1, backoff_seconds=0.01)
    ack = await acker.ack("m-1")
    await acker.close()
    assert ack.result is AckResult.FAILED
    assert ack.detail is not None and "ConnectError" in ack.detail


async def test_ack_topic_acks(acks_api: Api, consumer_db: AsyncEngine, topic: str,
                              unique: str) -> None:
    api = acks_api
    producer, points, audit, (first, second, third) = await _setup(api, topic)
    servers, ack_topic = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    first_at, second_at = [(await api.ack_body(producer, m, "points"))["created_at"]
                           for m in (first, second)]
    as_points = TopicAcker(servers, "points", signing_secret=points.signing_secret,
                           ack_topic=ack_topic)
    as_audit = TopicAcker(servers, "audit", signing_secret=audit.signing_secret,
                          ack_topic=ack_topic)
    try:
        for _ in range(2):
            assert (await as_points.ack(first, first_at)).result is AckResult.ACKED
        assert (await as_audit.ack(second, second_at)).result is AckResult.ACKED  # the broker
        assert (await as_points.ack("no-such-message", first_at)).result is AckResult.ACKED
        unbound = await as_points.ack(second)  # no instance named: never written
        assert unbound.result is AckResult.REFUSED and "rms-created-at" in str(unbound.detail)
        await eventually(lambda: _is_done(api, first), timeout=30)
        assert await _state(api, second) == "sent"  # took audit's ack, but RMS refused it
    finally:
        await as_points.close()
        await as_audit.close()

    # the consumer helper end to end, acking on the topic
    acker = make_acker("topic", bootstrap_servers=servers, consumer_app="points",
                       signing_secret=points.signing_secret, ack_topic=ack_topic)

    async def all_seen(reports: list[BatchReport]) -> bool:
        return sum(len(r.outcomes) for r in reports) >= 3

    async with RmsConsumer(engine=consumer_db, handler=record_effect, acker=acker,
                           bootstrap_servers=servers, group_id=f"points-{unique}",
                           pattern=re.escape(topic)) as consumer:
        await consume_until(consumer, all_seen)
    for message_id in (second, third):
        await eventually(lambda m=message_id: _is_done(api, m), timeout=30)
    assert await scalar(consumer_db, "SELECT count(*) FROM effects") == 3
    # each ack the consumer wrote is bound to the instance it read (its rms-created-at)
    created = {header(list(r.headers), "rms-message-id"): header(list(r.headers),
                                                                 "rms-created-at")
               for r in await read_topic(servers, topic, expect=3)}
    written = [orjson.loads(r.value or b"") for r in await read_topic(servers, ack_topic,
                                                                      expect=7, timeout=5)]
    bound = {(ack["message_id"], ack["created_at"]) for ack in written}  # every one binds
    assert {(m, created[m]) for m in (first, second, third)} <= bound


async def _is_done(api: Api, message_id: str) -> bool:
    return await _state(api, message_id) == "done"


def test_ack_mode_is_configuration() -> None:
    assert isinstance(make_acker("http", rms_url="http://rms", api_key="k"), HttpAcker)
    with pytest.raises(ValueError, match="consumer_app"):
        make_acker("topic", bootstrap_servers="127.0.0.1:9092")
    with pytest.raises(ValueError, match="'http' or 'topic'"):
        make_acker("carrier-pigeon")
