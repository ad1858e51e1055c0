"""The fault proxy itself: it forwards faithfully when healed, and its faults really happen."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from tests.system.faults.proxy import FaultProxy, Toxics, abort


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    upstream = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    running = FaultProxy(upstream_port=port)
    await running.start()
    yield running
    await running.stop()
    upstream.close()
    await upstream.wait_closed()


async def _round_trip(proxy: FaultProxy, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), 5)
    finally:
        writer.close()


async def test_a_healed_proxy_forwards_both_ways(proxy: FaultProxy) -> None:
    payload = bytes(range(256)) * 1000
    assert await _round_trip(proxy, payload) == payload
    assert not proxy.injected


async def test_latency_holds_each_chunk_back(proxy: FaultProxy) -> None:
    proxy.toxics = Toxics(latency=0.3)
    started = time.monotonic()
    assert await _round_trip(proxy, b"ping") == b"ping"
    assert time.monotonic() - started >= 0.6  # there and back


async def test_reset_breaks_the_connection_and_is_counted(proxy: FaultProxy) -> None:
    proxy.toxics = Toxics(reset=1.0)
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await _round_trip(proxy, b"ping")
    assert proxy.injected["reset"] == 1


async def test_drop_closes_the_connection(proxy: FaultProxy) -> None:
    proxy.toxics = Toxics(drop=1.0)
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await _round_trip(proxy, b"ping")
    assert proxy.injected["drop"] == 1


async def test_reset_all_cuts_live_connections_and_heal_restores(proxy: FaultProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    assert proxy.reset_all() == 1
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        writer.write(b"b")
        await writer.drain()
        await asyncio.wait_for(reader.readexactly(1), 5)
    writer.close()
    proxy.toxics = Toxics(refuse=True)
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await _round_trip(proxy, b"c")
    proxy.heal()
    assert await _round_trip(proxy, b"d") == b"d"


async def test_a_client_reset_is_passed_on_not_left_half_open() -> None:
    """A client that vanishes with a reset must not leave the upstream session open (it
    would keep a database transaction and its row locks alive)."""
    ended = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(1024):
                pass
        ended.set()
        writer.close()

    upstream = await asyncio.start_server(hold, "127.0.0.1", 0)
    proxy = FaultProxy(upstream_port=upstream.sockets[0].getsockname()[1])
    await proxy.start()
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"BEGIN")
        await writer.drain()
        await asyncio.sleep(0.1)
        abort(writer)
        await asyncio.wait_for(ended.wait(), 5)
    finally:
        await proxy.stop()
        upstream.close()
        await upstream.wait_closed()
