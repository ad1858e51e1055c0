"""Idle connections never take the capacity that authenticated work and health checks need,
against a real ``rms serve`` with a small connection cap: connections that sent one keyless
request and stay open are closed early and make room for new clients at the cap; when every
connection is busy a health check is still answered from the reserve and anything else gets a
503 problem document with ``Retry-After``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import orjson
import pytest

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.integration.security.served import create_app_keys, rms_serve

CAP, RESERVE, UNAUTHENTICATED_KEEP_ALIVE = 40, 4, 2

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@pytest.fixture
def serve(settings: Settings, tmp_path: Path) -> Iterator[int]:
    with rms_serve(settings, tmp_path / "serve.log", {
            "RMS_HTTP_LIMIT_CONCURRENCY": str(CAP), "RMS_HTTP_HEALTH_RESERVE": str(RESERVE),
            "RMS_HTTP_UNAUTHENTICATED_KEEP_ALIVE_SECONDS": str(UNAUTHENTICATED_KEEP_ALIVE),
            "RMS_HTTP_HEAD_TIMEOUT_SECONDS": "20"}) as port:
        yield port


@pytest.fixture
async def streams() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def _connect(port: int, stack: AsyncExitStack) -> Stream:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    stack.callback(writer.close)
    return reader, writer


async def _request(stream: Stream, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request on a kept connection; its status, headers and body."""
    reader, writer = stream
    writer.write(request)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines if line)
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(status_line.split()[1]), {k.lower(): v for k, v in headers.items()}, body


def _get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: rms\r\n\r\n".encode()


def _prepare(key: str, topic: str) -> bytes:
    body = orjson.dumps({"topic": topic, "payload": {"n": 1},
                         "check_url": "http://127.0.0.1:1/check"})
    return (b"POST /v1/messages HTTP/1.1\r\nHost: rms\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + key.encode() + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _closed_by_server(stream: Stream, within: float) -> bool:
    try:
        return await asyncio.wait_for(stream[0].read(), within) == b""
    except TimeoutError:
        return False


@pytest.mark.timeout(90)
async def test_idle_keyless_connections_make_room_and_close_early(
        serve: int, streams: AsyncExitStack, topic: str) -> None:
    key = create_app_keys(f"http://127.0.0.1:{serve}", ADMIN_TOKEN, "tenant")["api_key"]
    idle = [await _connect(serve, streams) for _ in range(CAP)]
    for stream in idle:  # the cap filled with connections that sent one keyless request
        assert (await _request(stream, _get("/healthz")))[0] == 200

    # a tenant on a new connection is served, and so is a health check on another
    status, _, body = await _request(await _connect(serve, streams), _prepare(key, topic))
    assert status == 201, body
    assert (await _request(await _connect(serve, streams), _get("/healthz")))[0] == 200
    # each took the place of the oldest idle connection
    assert await _closed_by_server(idle[0], 5) and await _closed_by_server(idle[1], 5)

    # the rest are closed after the short keep-alive of connections that never authenticated
    started = time.monotonic()
    assert all(await asyncio.gather(*(_closed_by_server(s, 15) for s in idle[2:])))
    assert time.monotonic() - started <= UNAUTHENTICATED_KEEP_ALIVE + 5


@pytest.mark.timeout(90)
async def test_an_authenticated_connection_keeps_the_full_keep_alive(
        serve: int, streams: AsyncExitStack, topic: str) -> None:
    key = create_app_keys(f"http://127.0.0.1:{serve}", ADMIN_TOKEN, "steady")["api_key"]
    tenant = await _connect(serve, streams)
    for _ in range(2):  # the second finds the key in the cache: the connection authenticated
        assert (await _request(tenant, _prepare(key, topic)))[0] == 201
    keyless = await _connect(serve, streams)
    assert (await _request(keyless, _get("/healthz")))[0] == 200
    assert await _closed_by_server(keyless, UNAUTHENTICATED_KEEP_ALIVE + 5)
    assert not await _closed_by_server(tenant, 1)  # past the short keep-alive, still open
    assert (await _request(tenant, _prepare(key, topic)))[0] == 201


@pytest.mark.timeout(90)
async def test_above_the_cap_health_is_answered_from_the_reserve_and_the_rest_refused(
        serve: int, streams: AsyncExitStack, topic: str) -> None:
    key = create_app_keys(f"http://127.0.0.1:{serve}", ADMIN_TOKEN, "late")["api_key"]
    await _busy(serve, streams, CAP)  # every connection busy: a request head on its way in

    status, headers, body = await _request(await _connect(serve, streams), _prepare(key, topic))
    assert status == 503
    assert headers["content-type"] == "application/problem+json"
    assert int(headers["retry-after"]) >= 1
    assert orjson.loads(body)["type"].endswith("/too-many-connections")
    assert headers.get("connection") == "close"
    # a health check above the cap is answered from the reserve
    assert (await _request(await _connect(serve, streams), _get("/healthz")))[0] == 200

    await _busy(serve, streams, RESERVE)  # the reserve busy too (the idle check made room)
    status, _, _ = await _request(await _connect(serve, streams), _get("/healthz"))
    assert status == 503


async def _busy(port: int, stack: AsyncExitStack, count: int) -> None:
    for _ in range(count):
        _, writer = await _connect(port, stack)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: rms\r\nX-Slow: ")
        await writer.drain()
    await asyncio.sleep(0.5)  # every head's first bytes read
