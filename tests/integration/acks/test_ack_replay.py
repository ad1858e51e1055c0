"""An ack record applies only to the message instance it was written for (design section 6):
a captured ack replayed after retention freed its id and another prepare reused it changes
nothing and is counted as ``stale``; the ack written for the new instance applies, however
old its signature; a record without ``created_at`` names no instance and is refused, and a
record repeating a ``webhook-*`` header is refused before its signature is read. Real API,
PostgreSQL, broker and retention."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY

from history.retention import RetentionRequest, run_retention
from rms.kafka.records import header
from rms_client.ack_records import (
    AckClaim,
    AckRecord,
    ack_value,
    claim_of,
    parse_ack,
    signed_ack_headers,
    written_for,
)
from rms_client.signing import signed_headers
from tests.support import Api, AppKeys, eventually, read_topic, write_records

Record = tuple[bytes, list[tuple[str, bytes]]]


def _rejected(reason: str) -> float:
    return REGISTRY.get_sample_value("rms_acks_rejected_total", {"reason": reason}) or 0.0


def _stale() -> float:
    return _rejected("stale")


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
                _signed(points.signing_secret, orjson.dumps({"message_id": "m-1",
                                                             "consumer": "points"}))]
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

    before, missing = _stale(), _rejected("missing-created-at")
    await write_records(bootstrap, acks, captured)  # the captured records, replayed as they were
    await eventually(lambda: _at_least(_stale, before + 1), timeout=20)
    await eventually(lambda: _at_least(lambda: _rejected("missing-created-at"), missing + 1),
                     timeout=20)
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
    assert written_for(claim, CREATED)
    assert not written_for(claim, CREATED + timedelta(microseconds=1))


def test_a_created_at_that_is_not_rfc3339_is_malformed() -> None:
    for written in ("yesterday", 1764144000, "2026-11-26T08:00:00", None, ""):
        body = {"message_id": "m-1", "consumer": "points", "created_at": written}
        assert parse_ack(orjson.dumps(body)) in ("malformed", "missing-created-at")
    assert parse_ack(orjson.dumps({"message_id": "m-1", "consumer": "points",
                                   "created_at": "yesterday"})) == "malformed"


def test_an_ack_without_created_at_names_no_instance_and_is_refused() -> None:
    value = orjson.dumps({"message_id": "m-1", "consumer": "points"})
    record = AckRecord.of(value, signed_ack_headers(["whsec_c2VjcmV0"], value))
    assert claim_of(record) == "missing-created-at"
    with pytest.raises(ValueError, match="rms-created-at"):
        ack_value("m-1", "points", "")
