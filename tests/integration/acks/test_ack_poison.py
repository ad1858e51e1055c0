"""Ack-topic records are judged one by one: a record that could never be applied (a NUL in its
consumer, a header without a value, a flood of unknown consumers) is counted and committed
past, and a valid signed ack written behind it still finishes its message promptly."""

from __future__ import annotations

import time

import orjson
import pytest
import structlog
from aiokafka import AIOKafkaProducer
from prometheus_client import REGISTRY

from rms_client.ack_records import AckRecord, parse_ack, signature_problem, signed_ack_headers
from tests.support import Api, AppKeys, eventually, produce, write_records


def _sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _rejected(reason: str) -> float:
    return _sample("rms_acks_rejected_total", {"reason": reason})


def _ack_loop_failures() -> float:
    return sum(_sample("rms_loop_failures_total", {"component": "ack-consumer", "cause": cause})
               for cause in ("database", "kafka", "other"))


async def _sent(api: Api, producer: AppKeys, topic: str, count: int) -> list[str]:
    ids = [await api.prepared_id(producer, topic) for _ in range(count)]
    for message_id in ids:
        assert (await api.post(producer, f"/v1/messages/{message_id}/confirm")).status_code == 200
    return ids


async def _state(api: Api, producer: AppKeys, message_id: str) -> str:
    response = await api.client.get(f"/v1/messages/{message_id}", headers=producer.headers)
    return str(response.json()["state"])


async def test_poisoned_records_do_not_stop_the_acks_behind_them(api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    first, second = await _sent(api, producer, topic, 2)
    servers, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    before = {r: _rejected(r) for r in ("malformed", "bad-signature")}
    failures_before = _ack_loop_failures()

    nul = orjson.dumps({"message_id": first, "consumer": "poi\u0000nts"})
    real = orjson.dumps(await api.ack_body(producer, first, "points"))
    signed = signed_ack_headers([points.signing_secret], real)
    null_header: list[tuple[str, bytes | None]] = [(name, None) for name, _ in signed]
    await write_records(servers, acks, [(nul, list(signed)), (real, null_header)])
    await produce(servers, acks, [await api.ack_body(producer, second, "points")],
                  points.signing_secret)

    await eventually(lambda: _is_done(api, producer, second), timeout=20)
    assert await _state(api, producer, first) == "sent"  # neither poisoned record applied
    assert _rejected("malformed") >= before["malformed"] + 1
    assert _rejected("bad-signature") >= before["bad-signature"] + 1
    assert _ack_loop_failures() == failures_before  # nothing was raised, nothing retried

    await produce(servers, acks, [await api.ack_body(producer, first, "points")],
                  points.signing_secret)  # the valid ack of the same message still counts
    await eventually(lambda: _is_done(api, producer, first), timeout=20)


async def test_a_flood_of_unknown_consumers_costs_one_lookup_and_one_line_per_batch(
        api: Api, topic: str) -> None:
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    (message_id,) = await _sent(api, producer, topic, 1)
    servers, acks = api.settings.kafka_bootstrap_servers, api.settings.ack_topic
    junk = [(orjson.dumps({"message_id": message_id, "consumer": f"nobody-{n}",
                           "created_at": "2026-11-26T08:00:00Z"}),
             list[tuple[str, bytes | None]]()) for n in range(5000)]
    before = _rejected("unknown-consumer")
    with structlog.testing.capture_logs() as logs:
        await _write_raw_fast(servers, acks, junk)
        await produce(servers, acks, [await api.ack_body(producer, message_id, "points")],
                      points.signing_secret)
        started = time.monotonic()
        await eventually(lambda: _is_done(api, producer, message_id), timeout=30)
    assert _rejected("unknown-consumer") >= before + 5000
    lines = [e for e in logs if e.get("event") == "ack_consumer.rejected"]
    # one line per batch read (up to 1,000 records each, fewer when the consumer reads while
    # the records arrive), never one per record
    assert sum(e["count"] for e in lines) >= 5000
    assert 1 <= len(lines) <= 100, len(lines)
    assert all(len(e["consumers"]) <= 10 for e in lines)
    assert time.monotonic() - started < 10


async def _write_raw_fast(servers: str, topic: str,
                          records: list[tuple[bytes, list[tuple[str, bytes | None]]]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=servers, enable_idempotence=False,
                                linger_ms=5)
    await producer.start()
    try:
        futures = [await producer.send(topic, value) for value, _ in records]
        for future in futures:
            await future
    finally:
        await producer.stop()


async def _is_done(api: Api, producer: AppKeys, message_id: str) -> bool:
    return await _state(api, producer, message_id) == "done"


@pytest.mark.parametrize("consumer", ["poi\u0000nts", "Points", "points\n", "", "-x", "a" * 64,
                                      "points/../x", "pöints"])
def test_a_consumer_that_cannot_be_an_app_name_is_malformed(consumer: str) -> None:
    assert parse_ack(orjson.dumps({"message_id": "m-1", "consumer": consumer,
                                   "created_at": "2026-11-26T08:00:00Z"})) == "malformed"


@pytest.mark.parametrize("message_id", ["m\u00001", "", "a" * 129, "batch", "..", "m 1", "m\n"])
def test_a_message_id_that_cannot_be_one_is_malformed(message_id: str) -> None:
    assert parse_ack(orjson.dumps({"message_id": message_id, "consumer": "points",
                                   "created_at": "2026-11-26T08:00:00Z"})) == "malformed"


def test_headers_without_values_are_a_bad_signature_not_an_error() -> None:
    value = orjson.dumps({"message_id": "m-1", "consumer": "points",
                          "created_at": "2026-11-26T08:00:00Z"})
    secret = "whsec_" + "QUJD" * 8
    signed = signed_ack_headers([secret], value)
    record = AckRecord.of(value, [(name, None) for name, _ in signed])
    assert signature_problem(record, [secret], required=True) == "bad-signature"
    binary = AckRecord.of(value, [(name, b"\xff\xfe" + raw) for name, raw in signed])
    assert signature_problem(binary, [secret], required=True) == "bad-signature"
    assert signature_problem(AckRecord.of(value, signed), [secret], required=True) is None


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_acks_compressed_with_any_kafka_codec_are_applied(api: Api, topic: str,
                                                               codec: str) -> None:
    """Producers compress by default in some clients (franz-go: snappy): RMS reads every
    codec Kafka has, so a compressed ack never stops the consumer."""
    producer = await api.create_app("orders", consume=["none"])
    points = await api.create_app("points", produce=["none"], consume=["orders.*"])
    (message_id,) = await _sent(api, producer, topic, 1)
    value = orjson.dumps(await api.ack_body(producer, message_id, "points"))
    writer = AIOKafkaProducer(bootstrap_servers=api.settings.kafka_bootstrap_servers,
                              enable_idempotence=False, compression_type=codec)
    await writer.start()
    try:
        await writer.send_and_wait(api.settings.ack_topic, value,
                                   headers=signed_ack_headers([points.signing_secret], value))
    finally:
        await writer.stop()
    await eventually(lambda: _is_done(api, producer, message_id), timeout=20)
