"""Acceptance with real ``rms recovery-worker`` processes: three workers share 2,000 due
messages without publishing any twice in a round, and a worker killed with SIGKILL mid-batch
loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rms.config import Settings
from rms.devstack.embedded import free_port
from tests.integration.redelivery.helpers import SqlHelper, deliveries, read_until_all
from tests.support import Api

MESSAGES = 2000


class Workers:
    """``rms recovery-worker`` processes, each logging to its own file."""

    def __init__(self, settings: Settings, log_dir: Path) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, count: int, *args: str, **env: str) -> None:
        environment = os.environ | {
            "RMS_DATABASE_URL": self.settings.database_url,
            "RMS_KAFKA_BOOTSTRAP_SERVERS": self.settings.kafka_bootstrap_servers,
            "RMS_ADMIN_TOKEN": "test-admin-token",
            "RMS_WORKER_INTERVAL_SECONDS": "0.1",
            "RMS_WORKER_BATCH_SIZE": "50",
            "RMS_WORKER_LEASE_SECONDS": "2",
            "RMS_LOG_JSON": "true",
        } | env
        for _ in range(count):
            log = open(self.log_dir / f"worker-{len(self.processes)}.log", "wb")  # noqa: SIM115
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "rms.cli", "recovery-worker", *args], env=environment,
                stdout=log, stderr=subprocess.STDOUT))

    def wait_started(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for index, process in enumerate(self.processes):
            log = self.log_dir / f"worker-{index}.log"
            while b"worker.started" not in log.read_bytes():
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@pytest.fixture
def workers(settings: Settings, tmp_path: Path) -> Iterator[Workers]:
    running = Workers(settings, tmp_path)
    yield running
    running.stop()


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_three_workers_never_publish_a_message_twice_in_a_round(
        api: Api, sql: SqlHelper, workers: Workers, topic: str) -> None:
    await api.create_app("orders")
    ids = await sql.seed_sent("orders", topic, MESSAGES, due=False)
    metrics_port = free_port()
    workers.start(1, "--metrics-port", str(metrics_port))
    workers.start(2)
    await asyncio.to_thread(workers.wait_started)
    await sql.make_due(ids)  # all due at once, while three workers race for them
    records = await read_until_all(api.settings.kafka_bootstrap_servers, topic, ids,
                                   timeout=60, settle=1.0)
    assert deliveries(records) == {(message_id, 2): 1 for message_id in ids}
    actors = await sql.rows("SELECT actor, count(*) FROM message_events "
                            "WHERE event = 'published' GROUP BY actor")
    assert sum(count for _, count in actors) == MESSAGES
    assert len(actors) == 3, actors  # every worker took a share
    async with httpx.AsyncClient() as client:
        scraped = (await client.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    samples = dict(line.split(" ", 1) for line in scraped.splitlines()
                   if line and not line.startswith("#"))
    assert float(samples["rms_redeliveries_total"]) > 0
    assert "rms_oldest_unacked_age_seconds" in samples


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_a_worker_killed_mid_batch_loses_nothing(
        api: Api, sql: SqlHelper, workers: Workers, topic: str) -> None:
    await api.create_app("orders")
    ids = await sql.seed_sent("orders", topic, MESSAGES, due=False)
    # a long linger keeps each batch in flight long enough to kill a worker inside one
    workers.start(3, RMS_KAFKA_LINGER_MS="200")
    await asyncio.to_thread(workers.wait_started)
    victim = workers.processes[0]
    held = ("SELECT count(*) FROM messages WHERE claim_token LIKE :pattern")
    pattern = f"recovery-worker:%:{victim.pid}:%"
    await sql.make_due(ids)
    deadline = time.monotonic() + 30
    while not await sql.scalar(held, pattern=pattern):
        assert time.monotonic() < deadline, "the victim never claimed anything"
        await asyncio.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.wait(5)
    orphaned = await sql.scalar(held, pattern=pattern)
    assert orphaned > 0  # it died holding a claim: those messages wait for the lease to end

    records = await read_until_all(api.settings.kafka_bootstrap_servers, topic, ids,
                                   timeout=60, settle=1.0)
    published = deliveries(records)
    assert {message_id for message_id, _ in published} == set(ids)
    assert max(published.values()) == 1  # never the same delivery number twice

    async def settled() -> bool:
        left = await sql.scalar("SELECT count(*) FROM messages WHERE claim_token IS NOT NULL "
                                "OR next_delivery_at < now() + interval '30 seconds'")
        return bool(left == 0)

    deadline = time.monotonic() + 20
    while not await settled():
        assert time.monotonic() < deadline, "claims left behind"
        await asyncio.sleep(0.1)
