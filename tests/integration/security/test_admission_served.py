"""Admission under attack and under one tenant's flood, against a real ``rms serve`` (limit 8):
requests that do not authenticate, however slowly they send, are answered 401 at once and hold
no place of an app's, and an app flooding far past the limit (fast prepares, and prepares whose
bodies trickle in) leaves another app's steady prepares answered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, rms_serve

LIMIT = 8
SLOW_CLIENTS = 12
FLOODERS = 48
STEADY_TRIES = 40


@pytest.fixture
def serve(settings: Settings, tmp_path: Path) -> Iterator[int]:
    with rms_serve(settings, tmp_path / "serve.log", {
            "RMS_ADMISSION_ENABLED": "true", "RMS_ADMISSION_LIMIT": str(LIMIT),
            "RMS_ADMISSION_MAX_LIMIT": str(LIMIT),
            "RMS_HTTP_BODY_TIMEOUT_SECONDS": "60"}) as port:
        yield port


def _keys(port: int, name: str) -> dict[str, str]:
    keys = create_app_keys(f"http://127.0.0.1:{port}", ADMIN_TOKEN, name)
    return {"Authorization": f"Bearer {keys['api_key']}"}


def _prepare(topic: str, n: int) -> dict[str, object]:
    return {"topic": topic, "payload": {"n": n}, "check_url": "http://127.0.0.1:1/c"}


async def _trickle(port: int, stop: asyncio.Event, authorization: bytes = b"") -> None:
    """``POST /v1/messages`` (without Authorization unless given), its body a byte a second
    until ``stop``."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /v1/messages HTTP/1.1\r\nHost: rms\r\nContent-Type: application/json\r\n"
                 + authorization + b"Content-Length: 1000\r\n\r\n")
    try:
        while not stop.is_set():
            writer.write(b" ")
            await writer.drain()
            await asyncio.wait([asyncio.create_task(stop.wait())], timeout=1.0)
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest.mark.timeout(120)
async def test_slow_clients_without_a_key_do_not_refuse_an_apps_prepares(
        serve: int, topic: str) -> None:
    tenant = _keys(serve, "tenant")
    stop = asyncio.Event()
    attack = [asyncio.create_task(_trickle(serve, stop)) for _ in range(SLOW_CLIENTS)]
    await asyncio.sleep(3)  # every slow request has its head in and its body trickling
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{serve}", headers=tenant,
                                     timeout=10) as client:
            statuses = []
            for n in range(10):
                statuses.append((await client.post("/v1/messages", json=_prepare(topic, n)))
                                .status_code)
                await asyncio.sleep(0.2)
            unauthenticated = await client.get("/v1/messages/m-1", headers={"Authorization": ""})
    finally:
        stop.set()
        await asyncio.gather(*attack)
    assert statuses == [201] * 10
    # a request without a key is told so at once, not invited to come back
    assert unauthenticated.status_code == 401, unauthenticated.text
    assert unauthenticated.json()["type"] == "https://rms.dev/problems/unauthorized"


async def _flood(client: httpx.AsyncClient, topic: str, stop: asyncio.Event) -> list[int]:
    statuses = []
    while not stop.is_set():
        statuses.append((await client.post("/v1/messages", json=_prepare(topic, 0))).status_code)
    return statuses


@pytest.mark.timeout(180)
async def test_one_apps_flood_leaves_another_apps_steady_prepares_answered(
        serve: int, topic: str) -> None:
    flooder, steady = _keys(serve, "flooder"), _keys(serve, "steady")
    flooder_key = flooder["Authorization"]
    base = f"http://127.0.0.1:{serve}"
    limits = httpx.Limits(max_connections=FLOODERS)
    async with (httpx.AsyncClient(base_url=base, headers=flooder, timeout=30,
                                  limits=limits) as flooding,
                httpx.AsyncClient(base_url=base, headers=steady, timeout=30) as client):
        stop = asyncio.Event()
        flood = [asyncio.create_task(_flood(flooding, topic, stop)) for _ in range(FLOODERS)]
        slow = [asyncio.create_task(_trickle(serve, stop, f"Authorization: {flooder_key}\r\n"
                                             .encode())) for _ in range(SLOW_CLIENTS)]
        await asyncio.sleep(3)  # the flood is on, its slow prepares trickling
        statuses = []
        for n in range(STEADY_TRIES):
            statuses.append((await client.post("/v1/messages", json=_prepare(topic, n)))
                            .status_code)
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*slow)
        flooded = [status for statuses_of in await asyncio.gather(*flood)
                   for status in statuses_of]
    answered = sum(200 <= status < 300 for status in statuses)
    assert answered >= 0.95 * len(statuses), statuses
    # the flood was far past the limit: the flooder's excess was refused, nothing else
    assert flooded.count(503) > 0, flooded.count(201)
    assert set(flooded) <= {201, 503}, sorted(set(flooded))
