"""Secrets never reach the logs: a full flow through real processes (``rms serve`` and
``rms confirm-worker`` at DEBUG, a real check-back server) that creates apps, prepares,
confirms, acks, cancels, is checked back and rotates keys and signing secrets; then every API
key, every signing secret and the admin token are searched for in everything the processes
wrote."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from rms.config import Settings
from rms.devstack.embedded import free_port
from rms_client.signing import Verifier
from tests.conftest import ADMIN_TOKEN
from tests.integration.checkback.servers import Call, CallbackServer, Reply, callback_server

LONG_ADMIN_TOKEN = ADMIN_TOKEN + "-kept-out-of-logs"


@dataclass
class Secrets:
    """Everything that must never be logged, collected as the flow reveals it."""

    values: set[str] = field(default_factory=lambda: {LONG_ADMIN_TOKEN})

    def keep(self, created: dict[str, Any]) -> None:
        for name in ("api_key", "signing_secret"):
            if name in created:
                self.values.add(created[name])


def _env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    return env | {
        "RMS_DATABASE_URL": settings.database_url,
        "RMS_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "RMS_ADMIN_TOKEN": LONG_ADMIN_TOKEN,
        "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
        "RMS_ACK_TOPIC": settings.ack_topic,
        "RMS_ACK_CONSUMER_GROUP": settings.ack_consumer_group,
        "RMS_WORKER_INTERVAL_SECONDS": "0.1",
        "RMS_LOG_LEVEL": "DEBUG",
        "RMS_LOG_JSON": "true",
    }


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[tuple[subprocess.Popen[bytes], Path]]]:
    started: list[tuple[subprocess.Popen[bytes], Path]] = []
    yield started
    for process, _ in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process, _ in started:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _start(started: list[tuple[subprocess.Popen[bytes], Path]], log: Path,
           env: dict[str, str], *args: str) -> None:
    with log.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "rms.cli", *args], env=env,
                                   stdout=sink, stderr=subprocess.STDOUT)
    started.append((process, log))


async def _wait_healthy(http: httpx.AsyncClient, started: list[Any]) -> None:
    deadline = time.monotonic() + 60
    while True:
        for process, log in started:
            assert process.poll() is None, log.read_text()
        try:
            if (await http.get("/healthz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "rms serve did not start"
        await asyncio.sleep(0.1)


@pytest.fixture
async def server() -> AsyncIterator[CallbackServer]:
    async with callback_server() as running:
        yield running


class Flow:
    def __init__(self, http: httpx.AsyncClient, server: CallbackServer, topic: str) -> None:
        self.http = http
        self.server = server
        self.topic = topic
        self.secrets = Secrets()
        self.admin = {"Authorization": f"Bearer {LONG_ADMIN_TOKEN}"}

    async def create(self, name: str) -> dict[str, str]:
        response = await self.http.post("/v1/admin/apps", headers=self.admin, json={
            "name": name, "produce_topics": ["*"], "consume_topics": ["*"],
            "check_url_prefixes": [self.server.url]})
        assert response.status_code == 201, response.text
        created: dict[str, str] = response.json()
        self.secrets.keep(created)
        return {"Authorization": f"Bearer {created['api_key']}"}

    async def call(self, method: str, path: str, headers: dict[str, str], status: int,
                   **kwargs: Any) -> dict[str, Any]:
        response = await self.http.request(method, path, headers=headers, **kwargs)
        assert response.status_code == status, response.text
        data: dict[str, Any] = response.json()
        self.secrets.keep(data)
        return data

    async def prepare(self, app: dict[str, str], message_id: str, **fields: Any) -> None:
        await self.call("POST", "/v1/messages", app, 201, json={
            "message_id": message_id, "topic": self.topic, "payload": {"id": message_id},
            "check_url": self.server.url + "check"} | fields)

    async def checked_back(self, message_id: str) -> Call:
        deadline = time.monotonic() + 60
        while not any(call.message_id == message_id for call in self.server.calls):
            assert time.monotonic() < deadline, f"{message_id} was never checked back"
            await asyncio.sleep(0.1)
        return next(call for call in self.server.calls if call.message_id == message_id)


async def _run_flow(flow: Flow) -> list[Call]:
    producer = await flow.create("producer")
    consumer = await flow.create("consumer")
    await flow.prepare(producer, "m-confirmed")
    await flow.call("POST", "/v1/messages/m-confirmed/confirm", producer, 200)
    await flow.call("POST", "/v1/messages/m-confirmed/ack", consumer, 200)
    await flow.prepare(producer, "m-cancelled")
    await flow.call("POST", "/v1/messages/m-cancelled/cancel", producer, 200)
    await flow.prepare(producer, "m-checked", check_after_seconds=0)
    first = await flow.checked_back("m-checked")
    # key rotation (with the signing secret), then a signing-secret rotation
    rotated = await flow.call("POST", "/v1/admin/apps/producer/rotate-key", flow.admin, 200,
                              json={"rotate_signing_secret": True})
    producer = {"Authorization": f"Bearer {rotated['api_key']}"}
    await flow.call("POST", "/v1/admin/apps/producer/rotate-signing-secret", flow.admin, 200)
    await flow.prepare(producer, "m-checked-after-rotation", check_after_seconds=0)
    second = await flow.checked_back("m-checked-after-rotation")
    # refused calls are logged too: wrong key, the admin token on an app endpoint
    await flow.call("GET", "/v1/messages/m-confirmed", {"Authorization": "Bearer rms_bad"}, 401)
    await flow.call("GET", "/v1/messages/m-confirmed", flow.admin, 401)
    await flow.call("GET", "/v1/admin/stats", producer, 401)
    await flow.call("GET", "/v1/admin/messages", flow.admin, 200)
    return [first, second]


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_no_secret_in_any_log(settings: Settings, server: CallbackServer, topic: str,
                                    processes: list[Any], tmp_path: Path) -> None:
    async def committed(_call: Call) -> Reply:
        return Reply.answer("committed")

    server.behaviour = committed
    port = free_port()
    env = _env(settings)
    _start(processes, tmp_path / "serve.log", env, "serve", "--port", str(port))
    _start(processes, tmp_path / "confirm-worker.log", env, "confirm-worker")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
        await _wait_healthy(http, processes)
        flow = Flow(http, server, topic)
        calls = await _run_flow(flow)
    for process, _ in processes:
        process.send_signal(signal.SIGTERM)
        process.wait(15)

    # the flow really ran: signed check-backs, both rotations seen by the worker
    assert len(calls[1].headers["webhook-signature"].split()) == 2
    signing = sorted(s for s in flow.secrets.values if s.startswith("whsec_"))
    Verifier(signing).verify(calls[1].headers, calls[1].body)
    # admin token; key + secret of 2 apps; of rotate-key; the rotated signing secret
    assert len(flow.secrets.values) == 1 + 2 * 2 + 2 + 1
    logs = {path.name: path.read_text() for _, path in processes}
    assert all(text.strip() for text in logs.values()), logs
    assert "kafka.connected" in logs["serve.log"]
    assert '"check.calling"' in logs["confirm-worker.log"]  # DEBUG really was on
    leaks = [(name, secret[:10] + "...") for name, text in logs.items()
             for secret in flow.secrets.values
             if secret in text or secret.removeprefix("whsec_") in text]
    assert leaks == []
