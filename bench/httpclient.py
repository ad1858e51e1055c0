"""A minimal HTTP/1.1 keep-alive client on asyncio streams: the load generator shares the cores
with the system under test, so it must cost far less CPU per request than httpx (~1 ms).

Only what the bench needs: POST/GET with a body, ``Content-Length`` or chunked responses, one
request at a time per connection, a pool of connections reused across tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit


class HttpError(RuntimeError):
    """The connection broke or the answer was not HTTP/1.1 we understand."""


class ConnectionDropped(HttpError):
    """A reused connection closed before any byte of the answer (the server dropped it as idle
    as the request went out): the server never read the request, so it can be sent again."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    retried: bool = False  # sent a second time after a dropped connection
    retry_after: bool = False  # the answer carries a Retry-After header ...
    retry_after_seconds: float = 0.0  # ... saying this many seconds (0: none, or not a number)
    sent: float = 0.0  # time.time() when the request went out on its connection


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _seconds(value: bytes | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        lowered = name.strip().lower()
        if lowered == b"content-length":
            return int(value.strip())
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            return None
    return 0


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 host_header: bytes) -> None:
        self._reader = reader
        self._writer = writer
        self._host = host_header

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: bytes = b"") -> Response:
        head = (f"{method} {path} HTTP/1.1\r\n".encode() + self._host + headers
                + b"content-type: application/json\r\ncontent-length: "
                + str(len(body)).encode() + b"\r\n\r\n")
        sent = time.time()
        self._writer.write(head + body)
        try:
            answer = await self._reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise HttpError(f"bad or broken response: {exc}") from exc
            raise ConnectionDropped("connection closed before any byte of the answer") from exc
        except ConnectionResetError as exc:
            raise ConnectionDropped(f"connection reset before the answer: {exc}") from exc
        except asyncio.LimitOverrunError as exc:
            raise HttpError(f"bad or broken response: {exc}") from exc
        try:
            length = _content_length(answer)
            payload = (await _read_chunked(self._reader) if length is None
                       else await self._reader.readexactly(length))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise HttpError(f"bad or broken response: {exc}") from exc
        retry_after = _header(answer, b"retry-after")
        return Response(int(answer[9:12]), payload, retry_after=retry_after is not None,
                        retry_after_seconds=_seconds(retry_after), sent=sent)

    def close(self) -> None:
        self._writer.close()


@dataclass
class Pool:
    """Up to ``size`` keep-alive connections to one ``http://host:port`` base URL."""

    base_url: str
    size: int
    _idle: list[Connection] = field(default_factory=list)
    _open: int = 0
    dropped_retries: int = 0
    _freed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def _connect(self) -> Connection:
        parts = urlsplit(self.base_url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        return Connection(reader, writer, f"host: {host}:{port}\r\n".encode())

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        async with self._freed:
            while not self._idle and self._open >= self.size:
                await self._freed.wait()
            conn = self._idle.pop() if self._idle else None
            if conn is None:
                self._open += 1
        try:
            conn = conn or await self._connect()
        except OSError as exc:
            await self._release(None)
            raise HttpError(f"connect failed: {exc}") from exc
        broken = True
        try:
            yield conn
            broken = False
        finally:
            if broken:
                conn.close()
            await self._release(None if broken else conn)

    async def _release(self, conn: Connection | None) -> None:
        async with self._freed:
            if conn is None:
                self._open -= 1
            else:
                self._idle.append(conn)
            self._freed.notify()

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: bytes = b"") -> Response:
        """Sent once more, on another connection, when the connection closes before any byte of
        the answer (safe: every RMS call is idempotent by id); such retries are counted in
        ``dropped_retries`` so that no figure hides them."""
        try:
            async with self.connection() as conn:
                return await conn.request(method, path, body, headers)
        except ConnectionDropped:
            self.dropped_retries += 1
        async with self.connection() as conn:
            answer = await conn.request(method, path, body, headers)
        return Response(answer.status, answer.body, retried=True,
                        retry_after=answer.retry_after,
                        retry_after_seconds=answer.retry_after_seconds, sent=answer.sent)

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
