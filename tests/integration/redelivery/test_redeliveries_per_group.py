"""What one consumer's redeliveries cost the others (design section 6, "Several consumers"):
ten consumer apps of one topic, each in its own Kafka consumer group, nine acking at the first
delivery and one never acking, against real PostgreSQL, Kafka and an in-process recovery
worker. Each healthy group reads every redelivery meant for the failing one and skips it on
its ``rms-awaiting`` header with the Python library's own decision (``RmsRecord.awaits``): no
handler, no database, no ack. The test checks those counts and prints what reading and
skipping cost per record on this machine (shared with other work: an indication, not a
benchmark)."""

from __future__ import annotations

import time
from typing import Any

from aiokafka import AIOKafkaConsumer

from rms.usecases.redelivery import RedeliveryWorker
from rms_client.consumer import RmsRecord
from tests.integration.redelivery.helpers import SqlHelper, message, tick_until
from tests.support import Api, AppKeys

GROUPS = 10
MESSAGES = 20
MAX_DELIVERIES = 4


async def _sent(api: Api, producer: AppKeys, topic: str) -> str:
    message_id = await api.prepared_id(producer, topic, max_deliveries=MAX_DELIVERIES)
    confirmed = await api.post(producer, f"/v1/messages/{message_id}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    return message_id


async def _read_as_group(api: Api, topic: str, app: str, expect: int) -> dict[str, Any]:
    """Every record of ``topic`` read by ``app``'s own group, each judged as the library
    judges it; the records handled and skipped and the seconds spent judging."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=api.settings.kafka_bootstrap_servers,
                                group_id=f"{app}-{topic}", auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    handled = skipped = 0
    judging = 0.0
    try:
        deadline = time.monotonic() + 60
        while handled + skipped < expect:
            assert time.monotonic() < deadline, (app, handled, skipped)
            batch = await consumer.getmany(timeout_ms=200)
            for record in (r for part in batch.values() for r in part):
                started = time.perf_counter()
                parsed = RmsRecord.parse(record)
                assert parsed is not None
                awaited = parsed.awaits(app)
                judging += time.perf_counter() - started
                handled, skipped = handled + awaited, skipped + (not awaited)
    finally:
        await consumer.stop()
    return {"handled": handled, "skipped": skipped, "judging_seconds": judging}


async def test_ten_groups_one_failing_each_healthy_group_skips_its_redeliveries(
        api: Api, topic: str, sql: SqlHelper, worker: RedeliveryWorker) -> None:
    producer = await api.create_app("orders", consume=["none"])
    consumers = [await api.create_app(f"c{n}", produce=["none"], consume=[topic])
                 for n in range(GROUPS)]
    healthy, failing = consumers[:-1], consumers[-1]
    ids = [await _sent(api, producer, topic) for _ in range(MESSAGES)]
    started = time.perf_counter()
    for consumer in healthy:  # each healthy consumer acks the first delivery
        for message_id in ids:
            acked = await api.post(consumer, f"/v1/messages/{message_id}/ack")
            assert acked.headers["RMS-Ack"] == "recorded", acked.text
    per_ack = (time.perf_counter() - started) / (len(healthy) * MESSAGES)
    for round_ in range(2, MAX_DELIVERIES + 1):
        await sql.make_due(ids)
        await tick_until(worker, lambda n=round_: _all_delivered(api, ids, n))
    await sql.make_due(ids)
    await tick_until(worker, lambda: _all_dead(api, ids))

    total = MESSAGES * MAX_DELIVERIES
    seen = {c.name: await _read_as_group(api, topic, c.name, total) for c in consumers}
    for consumer in healthy:
        assert (seen[consumer.name]["handled"], seen[consumer.name]["skipped"]) == (
            MESSAGES, MESSAGES * (MAX_DELIVERIES - 1))
    assert (seen[failing.name]["handled"], seen[failing.name]["skipped"]) == (total, 0)
    skips = sum(seen[c.name]["skipped"] for c in healthy)
    judged = sum(seen[c.name]["judging_seconds"] for c in consumers) / (total * GROUPS)
    print(f"\n{GROUPS} groups, 1 failing, {MESSAGES} messages, max_deliveries {MAX_DELIVERIES}: "
          f"{total} records on the topic, each read by every group; {skips} skipped by the "
          f"healthy groups ({MESSAGES * (MAX_DELIVERIES - 1)} each); judging a record "
          f"{judged * 1e6:.1f} us on average, one HTTP ack {per_ack * 1e3:.2f} ms, one after "
          f"another (this machine, shared)")


async def _all_delivered(api: Api, ids: list[str], count: int) -> bool:
    return all([int((await message(api, m))["delivery_count"]) >= count for m in ids])


async def _all_dead(api: Api, ids: list[str]) -> bool:
    return all([bool((await message(api, m))["dead"]) for m in ids])
