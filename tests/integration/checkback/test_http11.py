"""The check-back client speaks all of HTTP/1.1 that a producer's server may answer with, and
calls a producer twice only when the first call cannot have reached it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from confirm_service.http11 import Http11Pool, RemoteProtocolError, Reply, Request, TooLarge
from rms.callback_urls import CallTarget

BODY = b'{"status": "committed"}'
ANSWERS = {
    "content-length": b"HTTP/1.1 200 OK\r\nContent-Length: 23\r\n\r\n" + BODY,
    "chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"7\r\n{\"statu\r\n10\r\ns\": \"committed\"}\r\n0\r\nx-trailer: 1\r\n\r\n"),
    "close-delimited": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY,
    "http/1.0": b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY,
    "100-continue": (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                     b"HTTP/1.1 200 OK\r\nContent-Length: 23\r\n\r\n" + BODY),
    "connection-close": b"HTTP/1.1 200 OK\r\nContent-Length: 23\r\nConnection: close\r\n\r\n" + BODY,
}
CLOSES = {"close-delimited", "http/1.0", "connection-close"}


@dataclass
class Scripted:
    """A server that answers each request with ``answer`` cut into ``pieces`` (byte counts),
    closing the connection after it when ``close``."""

    answer: bytes
    close: bool = False
    pieces: Sequence[int] = ()
    requests: int = 0
    connections: int = 0
    port: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                self.requests += 1
                await self._write(writer)
                if self.close:
                    break
        writer.close()

    async def _write(self, writer: asyncio.StreamWriter) -> None:
        data, at = self.answer, 0
        for size in self.pieces:
            writer.write(data[at:at + size])
            await writer.drain()
            await asyncio.sleep(0)
            at += size
        writer.write(data[at:])
        await writer.drain()


@contextlib.asynccontextmanager
async def serving(script: Scripted) -> AsyncIterator[Http11Pool]:
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
    script.port = server.sockets[0].getsockname()[1]
    pool = Http11Pool(allow_unpinned=True, keepalive_seconds=5)
    try:
        async with server:
            yield pool
    finally:
        await pool.aclose()
        for writer in script.writers:
            writer.close()


async def _call(pool: Http11Pool, script: Scripted, limit: int = 65536) -> Reply:
    target = CallTarget("127.0.0.1", script.port, None)
    request = Request(f"http://127.0.0.1:{script.port}/check", target, b"{}",
                      {"webhook-id": "msg_1"}, limit)
    async with asyncio.timeout(5):
        return await pool.post(request)


@pytest.mark.parametrize("kind", sorted(ANSWERS))
async def test_every_legal_framing_is_read(kind: str) -> None:
    script = Scripted(ANSWERS[kind], close=kind in CLOSES)
    async with serving(script) as pool:
        first = await _call(pool, script)
        second = await _call(pool, script)
    assert (first.status, first.body) == (200, BODY)
    assert (second.status, second.body) == (200, BODY)
    assert script.requests == 2
    assert script.connections == (2 if kind in CLOSES else 1)  # kept alive unless told not to


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(ANSWERS)), cuts=st.lists(st.integers(1, 9), max_size=40))
async def test_any_split_of_the_answer_reads_the_same(kind: str, cuts: list[int]) -> None:
    script = Scripted(ANSWERS[kind], close=kind in CLOSES, pieces=cuts)
    async with serving(script) as pool:
        reply = await _call(pool, script)
    assert (reply.status, reply.body) == (200, BODY)


@pytest.mark.parametrize(("answer", "error"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", RemoteProtocolError),  # cut short
    (b"HTTP/1.1 2x0 OK\r\n\r\n", RemoteProtocolError),  # not HTTP
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
     RemoteProtocolError),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n", TooLarge),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"x" * 70000, TooLarge),
])
async def test_a_broken_or_oversized_answer_is_final_one_call(answer: bytes,
                                                              error: type[Exception]) -> None:
    """Not retried: the server got the call, so a retry would be a second call with the same
    webhook-id."""
    script = Scripted(answer, close=True)
    async with serving(script) as pool:
        with pytest.raises(error):
            await _call(pool, script)
    assert script.requests == 1 and script.connections == 1


async def test_a_non_2xx_status_is_returned_without_its_body() -> None:
    script = Scripted(b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy")
    async with serving(script) as pool:
        reply = await _call(pool, script)
    assert reply.status == 503 and script.requests == 1


async def test_a_kept_alive_connection_dropped_by_the_server_is_retried_once() -> None:
    script = Scripted(ANSWERS["content-length"])
    async with serving(script) as pool:
        assert (await _call(pool, script)).status == 200
        for writer in script.writers:  # the server drops the idle connection ...
            writer.close()
        await asyncio.sleep(0)  # ... but the client has not noticed yet
        assert (await _call(pool, script)).status == 200
    assert script.requests == 2 and script.connections == 2


async def test_a_fresh_connection_closed_before_answering_is_not_retried() -> None:
    script = Scripted(b"", close=True)  # reads the request, closes without a byte
    async with serving(script) as pool:
        with pytest.raises(RemoteProtocolError):
            await _call(pool, script)
    assert script.requests == 1 and script.connections == 1
