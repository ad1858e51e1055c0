"""Re-delivery until acknowledged (design sections 3 and 7), with the worker's tick called
directly: exact publish counts, dead letters, late acks, backoff and the delivery budget."""

from __future__ import annotations

from datetime import datetime

from prometheus_client import REGISTRY

from recovery_service.runtime import build
from rms.dispatcher import dispatcher_for
from rms.usecases.redelivery import RedeliveryWorker
from rms.worker import WorkerContext
from tests.integration.redelivery.helpers import SqlHelper, deliveries, events, message, tick_until
from tests.support import Api, read_topic


def _dead_letters(reason: str) -> float:
    return REGISTRY.get_sample_value("rms_dead_letters_total", {"reason": reason}) or 0.0


async def _confirmed(api: Api, topic: str, **policy: object) -> str:
    producer = api.apps.get("orders") or await api.create_app("orders", consume=["none"])
    message_id = await api.prepared_id(producer, topic, **policy)
    confirmed = await api.post(producer, f"/v1/messages/{message_id}/confirm")
    assert confirmed.status_code == 200, confirmed.text
    return message_id


async def test_never_acked_is_published_max_deliveries_times_then_dead_then_resent(
        api: Api, worker: RedeliveryWorker, topic: str) -> None:
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await _confirmed(api, topic, ack_timeout_seconds=0.2, max_deliveries=3)
    dead_before = _dead_letters("delivery-exhausted")

    async def is_dead() -> bool:
        return bool((await message(api, message_id))["dead"])

    await tick_until(worker, is_dead)
    stored = await message(api, message_id)
    assert (stored["state"], stored["dead_reason"], stored["delivery_count"]) == (
        "sent", "delivery-exhausted", 3)
    assert stored["next_delivery_at"] is None
    assert _dead_letters("delivery-exhausted") == dead_before + 1
    servers = api.settings.kafka_bootstrap_servers
    records = await read_topic(servers, topic, expect=3, settle=0.5)
    assert deliveries(records) == {(message_id, 1): 1, (message_id, 2): 1, (message_id, 3): 1}
    # dead means no automatic retry, however long we wait
    assert (await worker.tick()).claimed == 0

    resent = await api.client.post(f"/v1/admin/messages/{message_id}/resend", headers=api.admin)
    assert resent.status_code == 200, resent.text
    assert (resent.json()["dead"], resent.json()["delivery_count"]) == (False, 4)
    records = await read_topic(servers, topic, expect=4, settle=0.3)
    assert deliveries(records)[(message_id, 4)] == 1
    acked = await api.post(consumer, f"/v1/messages/{message_id}/ack")
    assert acked.json()["state"] == "done"
    history = await events(api, message_id)
    assert [e["event"] for e in history] == [
        "prepared", "confirmed", "published", "published", "published", "dead", "resent",
        "published", "acked"]
    assert history[5]["detail"] == {"reason": "delivery-exhausted", "deliveries": 3,
                                    "consumers": ["points"]}
    assert history[6]["actor"] == "admin"
    assert [e["detail"].get("delivery") for e in history if e["event"] == "published"] == [
        1, 2, 3, 4]


async def test_ack_after_the_last_delivery_but_in_time_wins(
        api: Api, worker: RedeliveryWorker, topic: str) -> None:
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await _confirmed(api, topic, ack_timeout_seconds=1.5, max_deliveries=1)
    report = await worker.tick()  # the only delivery's ack deadline has not passed yet
    assert (report.claimed, report.dead) == (0, 0)
    assert (await api.post(consumer, f"/v1/messages/{message_id}/ack")).status_code == 200
    stored = await message(api, message_id)
    assert (stored["state"], stored["dead"]) == ("done", False)


async def test_late_ack_of_a_dead_message_marks_it_done(
        api: Api, worker: RedeliveryWorker, sql: SqlHelper, topic: str) -> None:
    consumer = await api.create_app("points", produce=["none"], consume=["orders.*"])
    message_id = await _confirmed(api, topic, ack_timeout_seconds=60, max_deliveries=1)
    await sql.make_due([message_id])
    assert (await worker.tick()).dead == 1
    acked = await api.post(consumer, f"/v1/messages/{message_id}/ack")
    assert (acked.json()["state"], acked.json()["dead"], acked.json()["dead_reason"]) == (
        "done", False, None)


async def test_ack_deadlines_double_up_to_the_cap(
        api: Api, context: WorkerContext, sql: SqlHelper, topic: str) -> None:
    capped = context.settings.model_copy(update={"delivery_backoff_cap_seconds": 35.0})
    worker = build(capped, context.engine, context.publisher,
                   dispatcher_for(context.publisher, context.engine, capped),
                   "recovery-worker:capped")
    message_id = await _confirmed(api, topic, ack_timeout_seconds=10, max_deliveries=6)
    waits = []
    for _ in range(3):
        await sql.make_due([message_id])
        assert (await worker.tick()).published == 1
        waits.append(await sql.scalar(
            "SELECT extract(epoch FROM next_delivery_at - now()) FROM messages "
            "WHERE message_id = :id", id=message_id))
    # deliveries 2, 3, 4 wait 20 s, 35 s (40 capped), 35 s
    assert [round(float(w)) for w in waits] == [20, 35, 35]


async def test_failed_publishes_do_not_use_up_the_budget(
        api: Api, worker: RedeliveryWorker, context: WorkerContext, sql: SqlHelper, topic: str
) -> None:
    """The rule: only a publish the broker accepted is a delivery attempt."""
    from rms.kafka.publisher import KafkaPublisher

    message_id = await _confirmed(api, topic, ack_timeout_seconds=0.2, max_deliveries=2)
    nowhere = worker.settings.model_copy(update={"kafka_bootstrap_servers": "127.0.0.1:1"})
    down = KafkaPublisher(nowhere)
    down.state = down.state.CONNECTED  # as if connected to a broker that then went away
    cut_off = build(worker.settings, context.engine, down,
                    dispatcher_for(down, context.engine, worker.settings), "recovery-worker:cut-off")
    for _ in range(8):
        await sql.make_due([message_id])
        await cut_off.tick()
    stored = await message(api, message_id)
    assert (stored["dead"], stored["delivery_count"]) == (False, 1)
    names = [e["event"] for e in await events(api, message_id)]
    assert names.count("publish-failed") >= 1
    assert cut_off.probing  # after a failed round it only probes with one message per tick

    async def is_dead() -> bool:
        return bool((await message(api, message_id))["dead"])

    await tick_until(worker, is_dead)  # the broker is back: two accepted deliveries, then dead
    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2, settle=0.3)
    assert deliveries(records) == {(message_id, 1): 1, (message_id, 2): 1}


async def test_unconnected_publisher_claims_nothing(
        api: Api, context: WorkerContext, sql: SqlHelper, topic: str) -> None:
    from rms.kafka.publisher import KafkaPublisher

    message_id = await _confirmed(api, topic)
    await sql.make_due([message_id])
    unconnected = KafkaPublisher(context.settings)
    idle = build(context.settings, context.engine, unconnected,
                 dispatcher_for(unconnected, context.engine, context.settings),
                 "recovery-worker:idle")
    assert (await idle.tick()).claimed == 0
    stored = await message(api, message_id)
    assert stored["delivery_count"] == 1
    assert datetime.fromisoformat(stored["next_delivery_at"]) < datetime.now().astimezone()


async def test_claim_uses_the_due_deliveries_index(sql: SqlHelper) -> None:
    from sqlalchemy.dialects import postgresql

    from rms.store.redelivery import round_statement

    compiled = round_statement(10, "token", 30.0, "test").compile(
        dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})  # type: ignore[no-untyped-call]
    async with sql.engine.connect() as conn:
        from sqlalchemy import text

        await conn.execute(text("SET enable_seqscan = off"))
        plan = "\n".join(row[0] for row in await conn.execute(text(f"EXPLAIN {compiled}")))
    assert "messages_due_deliveries" in plan, plan
