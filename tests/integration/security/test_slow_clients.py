"""Slow clients against a real ``rms serve``: a request head or body that trickles in is cut
off at its deadline (408, connection closed) while ordinary clients are served throughout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, rms_serve

HEAD_SECONDS, BODY_SECONDS = 1.5, 2.5
SLOW_HEADS, SLOW_BODIES = 30, 10


@pytest.fixture
def serve(settings: Settings, tmp_path: Path) -> Iterator[int]:
    with rms_serve(settings, tmp_path / "serve.log", {
            "RMS_HTTP_HEAD_TIMEOUT_SECONDS": str(HEAD_SECONDS),
            "RMS_HTTP_BODY_TIMEOUT_SECONDS": str(BODY_SECONDS)}) as port:
        yield port


async def _trickle(port: int, head: bytes, rest: bytes) -> tuple[bytes, float]:
    """Send ``head`` at once, then ``rest`` a byte every 0.2 s; returns what the server said
    and after how many seconds it closed the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(head)
    received = b""
    try:
        for byte in rest:
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                received += await asyncio.wait_for(reader.read(65536), 0.2)
            except TimeoutError:
                continue
            if received == b"" or reader.at_eof():
                break
        received += await asyncio.wait_for(reader.read(65536), 10)
    except (ConnectionError, TimeoutError):
        pass
    finally:
        writer.close()
    return received, time.monotonic() - started


@pytest.mark.timeout(60)
async def test_slow_heads_and_bodies_are_cut_off_while_others_are_served(serve: int) -> None:
    key = create_app_keys(f"http://127.0.0.1:{serve}", ADMIN_TOKEN, "slow")["api_key"]
    endless_header = b"X-Slow: " + b"a" * 400
    heads = [_trickle(serve, b"GET /healthz HTTP/1.1\r\nHost: rms\r\n", endless_header)
             for _ in range(SLOW_HEADS)]
    # an app's prepares (a request without a valid key is answered 401 before its body)
    body_head = (b"POST /v1/messages HTTP/1.1\r\nHost: rms\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer " + key.encode() + b"\r\nContent-Length: 1000\r\n\r\n")
    bodies = [_trickle(serve, body_head, b"{" + b" " * 400) for _ in range(SLOW_BODIES)]
    slow = asyncio.gather(*heads, *bodies)

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{serve}") as client:
        served = 0
        while not slow.done():
            answer = await client.get("/healthz", timeout=2)
            assert answer.status_code == 200
            served += 1
            await asyncio.sleep(0.1)
    results = await slow

    assert served >= 10
    for received, seconds in results[:SLOW_HEADS]:
        assert received.startswith(b"HTTP/1.1 408 "), received[:200]
        assert HEAD_SECONDS - 0.1 <= seconds <= HEAD_SECONDS + 2.0, seconds
    for received, seconds in results[SLOW_HEADS:]:
        assert received.startswith(b"HTTP/1.1 408 "), received[:200]
        assert b"application/problem+json" in received
        assert BODY_SECONDS - 0.1 <= seconds <= BODY_SECONDS + 2.0, seconds


@pytest.mark.timeout(60)
async def test_an_idle_connection_is_closed_and_a_prompt_one_kept_alive(serve: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", serve)
    started = time.monotonic()
    eof = await asyncio.wait_for(reader.read(), 20)  # never sent a byte
    assert time.monotonic() - started <= HEAD_SECONDS + 2.0
    assert eof.startswith(b"HTTP/1.1 408 ")
    writer.close()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{serve}") as client:
        for _ in range(3):  # one keep-alive connection, requests well inside the deadlines
            assert (await client.get("/healthz")).status_code == 200
            await asyncio.sleep(HEAD_SECONDS / 2)
