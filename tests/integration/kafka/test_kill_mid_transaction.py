"""A real ``rms serve`` dies in the middle of a transaction's publish (the test fault
``RMS_FAULT_EXIT_AFTER_TRANSACTION_RECORDS``: it exits once the broker accepted the first
member's record, before the commit). A read_committed observer of the members' topics never
sees a strict prefix of that publish: the record the dead process wrote belongs to a Kafka
transaction that never commits, which the restarted instance (same ``RMS_INSTANCE_NAME``)
aborts at start by fencing its zombie; the recovery worker then publishes every member."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.kafka.topics import create_topics
from rms.worker import worker_context
from tests.conftest import ADMIN_TOKEN
from tests.integration.kafka.transactions_support import observing
from tests.integration.security.served import rms_serve
from tests.support import CHECK_PREFIX


async def _create_app(base: str) -> str:
    body = {"name": "orders", "produce_topics": ["*"], "consume_topics": ["*"],
            "check_url_prefixes": [CHECK_PREFIX]}
    async with httpx.AsyncClient(base_url=base) as client:
        created = await client.post("/v1/admin/apps", json=body,
                                    headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert created.status_code == 201, created.text
    key: str = created.json()["api_key"]
    return key


async def _confirm_until_killed(base: str, key: str, body: Mapping[str, object]) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        assert (await client.post("/v1/transactions", json=body, headers=auth)).status_code == 201
        with pytest.raises(httpx.TransportError):  # the process dies under the request
            await client.post(f"/v1/transactions/{body['transaction_id']}/confirm",
                              headers=auth)


def _dead(base: str, log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/healthz", timeout=0.5)
        except httpx.TransportError:
            assert "fault.exit_mid_transaction" in log.read_text(), log.read_text()[-3000:]
            return
        time.sleep(0.1)
    raise AssertionError("rms serve did not die")


@pytest.mark.timeout(300)
async def test_a_serve_killed_mid_transaction_never_shows_a_strict_prefix(
        settings: Settings, kafka: EmbeddedKafka, unique: str, tmp_path: Path) -> None:
    servers = kafka.bootstrap_servers
    topics = [f"orders.{unique}", f"billing.{unique}"]
    await create_topics({"bootstrap_servers": servers}, topics, partitions=1)
    ids = [f"m{n}-{unique}" for n in range(3)]
    body = {"transaction_id": f"tx-{unique}", "check_url": CHECK_PREFIX + "check",
            "messages": [{"message_id": i, "topic": topics[n % 2], "payload": {"n": n},
                          "ack_timeout_seconds": 1.0} for n, i in enumerate(ids)]}
    # a transaction time-out far beyond the test: only the fencing can end the zombie's
    env = {"RMS_INSTANCE_NAME": f"node-{unique}", "RMS_LOG_JSON": "false",
           "RMS_KAFKA_TRANSACTION_TIMEOUT_SECONDS": "900"}
    async with (observing(servers, topics) as committed,
                observing(servers, topics, "read_uncommitted") as uncommitted):
        killed_log = tmp_path / "killed.log"
        with rms_serve(settings, killed_log,
                       env | {"RMS_FAULT_EXIT_AFTER_TRANSACTION_RECORDS": "1"}) as port:
            base = f"http://127.0.0.1:{port}"
            key = await _create_app(base)
            await _confirm_until_killed(base, key, body)
            _dead(base, killed_log)
        # the dead process's first member reached the broker, inside its open transaction
        await uncommitted.until("the zombie's record", lambda: ids[0] in uncommitted.seen("1"),
                                30)
        with rms_serve(settings, tmp_path / "restarted.log", env):
            async with worker_context(settings, "recovery-worker") as context:
                worker = from_context(context)
                deadline = time.monotonic() + 120
                while set(committed.seen("2")) != set(ids):
                    assert time.monotonic() < deadline, (committed.seen(), uncommitted.seen())
                    assert not committed.seen("1"), committed.seen()
                    await worker.tick()
                    await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # anything more the observers would read
    # none of the interrupted publish's records is visible: never a strict prefix of it
    assert committed.seen("1") == []
    assert sorted(set(committed.seen("2"))) == sorted(ids)
