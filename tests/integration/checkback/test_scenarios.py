"""The classic check-back scenarios, end to end: real API, real PostgreSQL, real broker, a real
HTTP callback server, the worker's own tick."""

from __future__ import annotations

import asyncio
from collections import Counter

from prometheus_client import REGISTRY

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.kafka.records import header
from rms_client.signing import Verifier
from tests.integration.checkback.helpers import FAST, all_settled, drive, events, message
from tests.integration.checkback.servers import Behaviour, Call, CallbackServer, Reply
from tests.support import Api, AppKeys, read_topic

MAX_CHECKS = 4
SCRIPTS = {
    "commit": ["committed"],
    "rollback": ["rolled_back"],
    "unknown-then-commit": ["unknown", "committed"],
    "unknown-then-rollback": ["unknown", "rolled_back"],
    "unknown-forever": ["unknown"] * MAX_CHECKS,
}


def scripted(ids: dict[str, str]) -> Behaviour:
    """Answer call number n of a message with its script's n-th status."""
    names = {message_id: name for name, message_id in ids.items()}

    async def behaviour(call: Call) -> Reply:
        script = SCRIPTS[names[call.message_id]]
        return Reply.answer(script[min(call.check_count, len(script)) - 1])

    return behaviour


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_five_messages(api: Api, producer: AppKeys, server: CallbackServer,
                             worker_settings: Settings, topic: str, unique: str) -> None:
    ids = {name: await api.prepared_id(producer, topic, message_id=f"{name}-{unique}",
                                       check_url=server.url + "check", max_checks=MAX_CHECKS,
                                       payload={"case": name}, **FAST)
           for name in SCRIPTS}
    server.behaviour = scripted(ids)
    dead_before = metric("rms_dead_letters_total", reason="check-exhausted")
    checks_before = {o: metric("rms_checks_total", outcome=o)
                     for o in ("committed", "rolled_back", "unknown")}

    async with checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, list(ids.values())))
        for _ in range(5):  # nothing more happens to settled messages
            await worker.tick()
            await asyncio.sleep(0.1)

    found = {name: await message(api, producer, ids[name]) for name in SCRIPTS}
    assert {n: (m["state"], m["dead"], m["dead_reason"]) for n, m in found.items()} == {
        "commit": ("sent", False, None),
        "rollback": ("deleted", False, None),
        "unknown-then-commit": ("sent", False, None),
        "unknown-then-rollback": ("deleted", False, None),
        "unknown-forever": ("pending-send", True, "check-exhausted"),
    }
    calls = server.per_message()
    assert {name: calls[ids[name]] for name in SCRIPTS} == {
        name: len(script) for name, script in SCRIPTS.items()}
    assert found["unknown-forever"]["check_count"] == MAX_CHECKS
    for name in SCRIPTS:
        counts = [c.check_count for c in server.calls if c.message_id == ids[name]]
        assert counts == list(range(1, len(SCRIPTS[name]) + 1))

    records = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=2, settle=1.0)
    published = Counter(header(r.headers, "rms-message-id") for r in records)
    assert published == {ids["commit"]: 1, ids["unknown-then-commit"]: 1}

    assert metric("rms_dead_letters_total", reason="check-exhausted") - dead_before == 1
    deltas = {o: metric("rms_checks_total", outcome=o) - checks_before[o] for o in checks_before}
    assert deltas == {"committed": 2, "rolled_back": 2, "unknown": 2 + MAX_CHECKS}


async def test_history_records_every_call(api: Api, producer: AppKeys, server: CallbackServer,
                                          worker_settings: Settings, topic: str) -> None:
    committed = await api.prepared_id(producer, topic, check_url=server.url + "c",
                                      max_checks=3, **FAST)
    exhausted = await api.prepared_id(producer, topic, check_url=server.url + "x",
                                      max_checks=3, **FAST)

    async def behaviour(call: Call) -> Reply:
        return Reply.answer("committed" if call.path == "/c" else "unknown")

    server.behaviour = behaviour
    async with checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, [committed, exhausted]))

    history = [(e["event"], e["detail"]) for e in await events(api, producer, committed)]
    assert history == [
        ("prepared", {}),
        ("checked", {"attempt": 1, "outcome": "committed"}),
        ("confirmed", {"by": "check-back"}),
        ("published", {"delivery": 1}),
    ]
    history = [(e["event"], e["detail"]) for e in await events(api, producer, exhausted)]
    assert history == [("prepared", {})] + [
        ("checked", {"attempt": n, "outcome": "unknown"}) for n in (1, 2, 3)
    ] + [("dead", {"reason": "check-exhausted"})]


async def test_calls_carry_the_contract_body_and_a_valid_signature(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    message_id = await api.prepared_id(producer, topic, key="k-9", headers={"trace": "t1"},
                                       check_url=server.url + "check", **FAST)

    async def behaviour(_call: Call) -> Reply:
        return Reply.answer("rolled_back")

    server.behaviour = behaviour
    async with checkback_worker(worker_settings) as worker:
        await drive(worker, lambda: all_settled(api, producer, [message_id]))

    [call] = server.calls
    stored = await message(api, producer, message_id)
    assert call.json == {
        "message_id": message_id, "app": producer.name, "topic": topic, "key": "k-9",
        "headers": {"trace": "t1"}, "created_at": stored["created_at"].replace("+00:00", "Z"),
        "check_count": 1,
    }
    assert call.headers["webhook-id"] == f"msg_{message_id}_1"
    assert call.headers["content-type"] == "application/json"
    verified = Verifier([producer.signing_secret]).verify(call.headers, call.body)
    assert verified.webhook_id == f"msg_{message_id}_1"


async def test_rotated_secret_signs_with_both(api: Api, producer: AppKeys, server: CallbackServer,
                                              worker_settings: Settings, topic: str) -> None:
    rotated = await api.client.post(f"/v1/admin/apps/{producer.name}/rotate-key",
                                    json={"rotate_signing_secret": True}, headers=api.admin)
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["signing_secret"]
    assert new_secret != producer.signing_secret
    producer.api_key = rotated.json()["api_key"]
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check", **FAST)
    async def called() -> bool:
        return bool(server.calls)

    async with checkback_worker(worker_settings) as worker:
        await drive(worker, called)
    call = server.calls[0]
    assert len(call.headers["webhook-signature"].split()) == 2
    for secret in (producer.signing_secret, new_secret):
        Verifier([secret]).verify(call.headers, call.body)
    assert call.message_id == message_id
