"""Check-back of delayed messages, end to end (real API, PostgreSQL, broker and callback
server): a producer that crashed before confirming is resolved by check-back as usual; a commit
found after the delivery time publishes at once, one found before it waits for the time."""

from __future__ import annotations

from datetime import datetime, timedelta

from confirm_service.runtime import checkback_worker
from rms.config import Settings
from rms.kafka.records import header
from tests.integration.checkback.helpers import FAST, drive, events, message
from tests.integration.checkback.servers import Call, CallbackServer, Reply
from tests.support import Api, AppKeys, read_topic


async def _committed(_call: Call) -> Reply:
    return Reply.answer("committed")


async def _published(api: Api, producer: AppKeys, message_id: str) -> list[dict[str, object]]:
    return [e for e in await events(api, producer, message_id) if e["event"] == "published"]


async def test_commit_found_after_the_delivery_time_publishes_at_once(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    server.behaviour = _committed
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check",
                                       delay_seconds=0.3, check_after_seconds=1.0)
    async with checkback_worker(worker_settings) as worker:
        async def is_sent() -> bool:
            return bool((await message(api, producer, message_id))["state"] == "sent")

        await drive(worker, is_sent)
    stored = await message(api, producer, message_id)
    assert stored["delivery_count"] == 1  # reserved and published by the confirm worker
    (published,) = await _published(api, producer, message_id)
    assert datetime.fromisoformat(str(published["at"])) >= datetime.fromisoformat(
        stored["deliver_after"])
    (record,) = await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                                 settle=0.3)
    assert header(list(record.headers), "rms-delivery") == "1"


async def test_commit_found_before_the_delivery_time_waits_for_it(
        api: Api, producer: AppKeys, server: CallbackServer, worker_settings: Settings,
        topic: str) -> None:
    server.behaviour = _committed
    message_id = await api.prepared_id(producer, topic, check_url=server.url + "check",
                                       delay_seconds=120, **FAST)
    async with checkback_worker(worker_settings) as worker:
        async def is_sent() -> bool:
            return bool((await message(api, producer, message_id))["state"] == "sent")

        await drive(worker, is_sent)
    stored = await message(api, producer, message_id)
    assert (stored["delivery_count"], stored["next_delivery_at"]) == (0, stored["deliver_after"])
    deliver_after = datetime.fromisoformat(stored["deliver_after"])
    assert deliver_after - datetime.fromisoformat(stored["confirmed_at"]) > timedelta(seconds=60)
    assert await _published(api, producer, message_id) == []
    assert [e["event"] for e in await events(api, producer, message_id)][-1] == "confirmed"
    assert await read_topic(api.settings.kafka_bootstrap_servers, topic, expect=1,
                            timeout=1.0) == []
