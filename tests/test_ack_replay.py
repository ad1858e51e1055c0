"""An ack record applies only to the message instance it was written for (design section 6):
a captured ack replayed after retention freed its id and another prepare reused it changes
nothing and is counted as ``stale``; the ack written for the new instance applies, however
old its signature; a record without ``created_at`` applies only when written after the
instance was created. Real API, PostgreSQL, broker and retention."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from prometheus_client import REGISTRY

from history.retention import RetentionRequest, run_retention
from rms.kafka.records import header
from rms_client.ack_records import (
    AckClaim,
    AckRecord,
    ack_value,
    parse_ack,
    signed_ack_headers,
    written_for,
)
from rms_client.signing import signed_headers
from tests.support import Api, AppKeys, eventually, read_topic, write_records

Record = tuple[bytes, list[tuple[str, bytes]]]


def _stale() -> float:
    return REGISTRY.get_sample_value("rms_acks_rejected_total", {"reason": "stale"}) or 0.0


def _signed(secret: str, value: bytes, stamp: int | None = None) -> Record:
    headers = signed_headers([secret], f"ack_{time.monotonic_ns()}", value, stamp)
    return value, [(name, text.encode()) for name, text in headers.items()]


async def _created_at(api: Api, topic: str, count: int) -> str:
    """The ``rms-created-at`` of the ``count``-th record on ``topic``."""
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=count)
    assert len(records) == count
    created = header(list(records[-1].headers), "rms-created-at")
    assert created is not None
    return created


async def _state(api: Api, app: AppKeys, message_id: str) -> str:
    response = await api.client.get(f"/v1/messages/{message_id}", headers=app.headers)
    return str(response.json().get("state", response.status_code))


async def _send(api: Api, app: AppKeys, topic: str, message_id: str) -> dict[str, Any]:
    response = await api.post(app, "/v1/messages/send", json={
        "message_id": message_id, "topic": topic, "payload": {"n": 1},
        "check_url": "http://127.0.0.1:1/c"})
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_a_replayed_ack_never_finishes_the_next_message_under_its_id(
        api: Api, topic: str) -> None:
    shop = await api.create_app("shop", consume=["none"])
    other = await api.create_app("other", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    bootstrap, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic

    await _send(api, shop, topic, "m-1")
    first_instance = await _created_at(api, topic, 1)
    captured = [_signed(points.signing_secret, ack_value("m-1", "points", first_instance)),
                _signed(points.signing_secret, ack_value("m-1", "points"))]  # no created_at
    await write_records(bootstrap, acks, captured[:1])
    await eventually(lambda: _is(_state(api, shop, "m-1"), "done"), timeout=20)

    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    removed = await asyncio.to_thread(run_retention, RetentionRequest(api.settings.database_url,
                                                                      before=cutoff))
    assert removed.messages == 1
    await asyncio.sleep(1.1)  # the next instance is created in a later second than the acks
    second = await _send(api, other, topic, "m-1")  # another app reuses the freed id
    second_instance = await _created_at(api, topic, 2)
    assert second_instance != first_instance

    before = _stale()
    await write_records(bootstrap, acks, captured)  # the captured records, replayed as they were
    await eventually(lambda: _at_least(_stale, before + 2), timeout=20)
    assert await _state(api, other, "m-1") == "sent"

    hour_old = int(time.time()) - 3600  # written while RMS was down: still applies
    await write_records(bootstrap, acks, [_signed(points.signing_secret, ack_value(
        "m-1", "points", second_instance), hour_old)])
    await eventually(lambda: _is(_state(api, other, "m-1"), "done"), timeout=20)
    assert second["created_at"] == second_instance


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


async def _at_least(read: Any, target: float) -> bool:
    return bool(read() >= target)


CREATED = datetime(2026, 11, 26, 8, 0, 0, 123456, tzinfo=UTC)


def test_created_at_binds_the_ack_to_one_instance() -> None:
    value = ack_value("m-1", "points", "2026-11-26T08:00:00.123456Z")
    claim = parse_ack(value)
    assert claim == AckClaim("m-1", "points", CREATED)
    record = AckRecord.of(value, signed_ack_headers(["whsec_c2VjcmV0"], value))
    assert written_for(claim, record, CREATED)
    assert not written_for(claim, record, CREATED + timedelta(microseconds=1))


def test_a_created_at_that_is_not_rfc3339_is_malformed() -> None:
    for written in ("yesterday", 1764144000, "2026-11-26T08:00:00"):
        assert parse_ack(orjson.dumps({"message_id": "m-1", "consumer": "points",
                                       "created_at": written})) is None


def test_an_ack_without_created_at_applies_when_written_after_the_creation_second() -> None:
    value = ack_value("m-1", "points")
    claim = parse_ack(value)
    assert claim is not None and claim.created_at is None
    created = CREATED.timestamp()

    def signed_at(stamp: float) -> AckRecord:
        return AckRecord.of(value, _signed("whsec_c2VjcmV0", value, int(stamp))[1])

    assert written_for(claim, signed_at(created), CREATED)  # the same second
    assert written_for(claim, signed_at(created + 3600), CREATED)  # an hour late
    assert not written_for(claim, signed_at(created - 1), CREATED)  # before it existed
    unsigned_late = AckRecord.of(value, [], timestamp_ms=int((created + 5) * 1000))
    unsigned_early = AckRecord.of(value, [], timestamp_ms=int((created - 5) * 1000))
    assert written_for(claim, unsigned_late, CREATED)
    assert not written_for(claim, unsigned_early, CREATED)
    assert not written_for(claim, AckRecord.of(value, []), CREATED)  # no time at all
