"""Acceptance with real ``rms confirm-worker`` processes sharing one database: every message is
checked exactly once per round, and a worker killed with SIGKILL mid-batch loses nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.config import Settings
from rms.devstack.embedded import free_port
from rms.store.database import create_engine
from tests.integration.checkback.helpers import prepare_many
from tests.integration.checkback.servers import Call, CallbackServer, Reply
from tests.support import Api, AppKeys

MESSAGES = 2000


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def ready(self) -> bool:
        return b'"worker.started"' in self.log.read_bytes()


def _env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    return env | {
        "RMS_DATABASE_URL": settings.database_url,
        "RMS_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "RMS_ADMIN_TOKEN": settings.admin_token or "",
        "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
        "RMS_WORKER_INTERVAL_SECONDS": "0.1",
        "RMS_LOG_JSON": "true",
        # 3 workers and the callback server share this machine's few cores: a generous
        # timeout keeps a starved server from turning answers into "unknown"
        "RMS_CALLBACK_TIMEOUT_SECONDS": "30",
        "RMS_WORKER_LEASE_SECONDS": "120",
        "RMS_WORKER_CONCURRENCY": "16",
    } | extra


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[list[Worker]]:
    """Started workers (by :func:`start_workers`), stopped at the end whatever happened."""
    workers: list[Worker] = []
    yield workers
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.process.wait(15)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()


def spawn_worker(log: Path, env: dict[str, str], *args: str) -> Worker:
    """A real ``rms confirm-worker`` process, as an operator starts it."""
    with log.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "rms.cli", "confirm-worker", *args],
                                   env=env, stdout=sink, stderr=subprocess.STDOUT)
    return Worker(process, log)


async def start_workers(workers: list[Worker], tmp_path: Path, count: int,
                        env: dict[str, str], metrics_port: int = 0) -> None:
    """``count`` workers; the first serves its metrics on ``metrics_port`` (0: none)."""
    workers += [spawn_worker(tmp_path / f"worker-{n}.log", env,
                             "--metrics-port", str(metrics_port if n == 0 else 0))
                for n in range(count)]
    deadline = time.monotonic() + 60
    while not all(w.ready for w in workers):
        for worker in workers:
            assert worker.process.poll() is None, worker.log.read_text()
        assert time.monotonic() < deadline, "workers did not start"
        await asyncio.sleep(0.1)


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(settings, pool_size=2)
    yield engine
    await engine.dispose()


async def count(engine: AsyncEngine, sql: str, **params: object) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(sql), params)).scalar() or 0)


async def wait_until_all(engine: AsyncEngine, state: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while await count(engine, "SELECT count(*) FROM messages WHERE state <> :s OR dead",
                      s=state):
        assert time.monotonic() < deadline, "messages left unresolved"
        await asyncio.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_three_workers_check_each_message_once_per_round(
        api: Api, producer: AppKeys, server: CallbackServer, settings: Settings,
        engine: AsyncEngine, spawn: list[Worker], tmp_path: Path, topic: str) -> None:
    async def unknown_then_committed(call: Call) -> Reply:
        return Reply.answer("unknown" if call.check_count == 1 else "committed")

    server.behaviour = unknown_then_committed
    metrics_port = free_port()
    await start_workers(spawn, tmp_path, 3, _env(settings), metrics_port)
    ids = await prepare_many(api, producer, topic, MESSAGES, server.url + "check",
                             check_after_seconds=0.5)
    await wait_until_all(engine, "sent", timeout=150)

    rounds = Counter((call.message_id, call.check_count) for call in server.calls)
    assert set(rounds.values()) == {1}
    assert set(rounds) == {(m, n) for m in ids for n in (1, 2)}
    actors = await count(engine, "SELECT count(DISTINCT actor) FROM message_events "
                                 "WHERE event = 'checked'")
    assert actors == 3  # the work really was shared
    await _assert_metrics(metrics_port)


async def _assert_metrics(port: int) -> None:
    """The first worker's /metrics: what it did, under the names alerts use."""
    async with httpx.AsyncClient() as http:
        text_format = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    samples = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text_format.splitlines()
               if line and not line.startswith("#")}
    assert samples['rms_checks_total{outcome="unknown"}'] > 0
    assert samples['rms_checks_total{outcome="committed"}'] > 0
    assert samples["rms_check_seconds_count"] > 0
    assert samples["rms_check_batch_size_count"] > 0
    assert "rms_oldest_due_check_lag_seconds" in samples


def test_configuration_error_exits_2(tmp_path: Path) -> None:
    """A worker needs no admin token (it serves no admin endpoint), but a bad setting it reads
    stops it with one line naming the variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    done = subprocess.run([sys.executable, "-m", "rms.cli", "confirm-worker"],
                          env=env | {"RMS_WORKER_BATCH_SIZE": "0"},
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert "rms confirm-worker: configuration error" in done.stderr
    assert "RMS_WORKER_BATCH_SIZE" in done.stderr
    assert "RMS_ADMIN_TOKEN" not in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_worker_killed_mid_batch_loses_nothing(
        api: Api, producer: AppKeys, server: CallbackServer, settings: Settings,
        engine: AsyncEngine, spawn: list[Worker], tmp_path: Path, topic: str) -> None:
    async def commit(_call: Call) -> Reply:
        return Reply.answer("committed")

    server.behaviour = commit
    # short lease so the victim's claims come back soon; small batches so it dies mid-batch
    env = _env(settings, RMS_WORKER_LEASE_SECONDS="5", RMS_CALLBACK_TIMEOUT_SECONDS="2",
               RMS_WORKER_BATCH_SIZE="50")
    await start_workers(spawn, tmp_path, 3, env)
    ids = await prepare_many(api, producer, topic, MESSAGES, server.url + "check",
                             check_after_seconds=0.3)
    victim = spawn[0].process
    held = {"p": f"confirm-worker:%:{victim.pid}:%"}
    holding = "FROM messages WHERE state = 'pending-send' AND claim_token LIKE :p"
    deadline = time.monotonic() + 60
    while True:  # freeze it; kill it only if it still holds claims once the writes it had
        # already sent have landed (else let it go on and try again)
        assert time.monotonic() < deadline, "the victim never held a claim"
        victim.send_signal(signal.SIGSTOP)
        await asyncio.sleep(0.5)
        if await count(engine, f"SELECT count(*) {holding}", **held):
            break
        victim.send_signal(signal.SIGCONT)
        await asyncio.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    await asyncio.sleep(0.5)
    async with engine.connect() as conn:
        abandoned = list((await conn.execute(text(f"SELECT message_id {holding}"), held)).scalars())
    assert abandoned  # it died holding claims nobody can write with any more

    await wait_until_all(engine, "sent", timeout=150)
    rounds = Counter((call.message_id, call.check_count) for call in server.calls)
    assert set(rounds.values()) == {1}  # still never two calls in one round
    assert {m for m, _ in rounds} == set(ids)
    async with engine.connect() as conn:
        counts = (await conn.execute(text(
            "SELECT min(check_count) FROM messages WHERE message_id = ANY(:ids)"),
            {"ids": abandoned})).scalar()
    assert counts is not None and counts >= 2  # each abandoned claim was taken again
