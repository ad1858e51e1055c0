"""A small asyncio TCP fault proxy (toxiproxy and tc netem are not available here).

``FaultProxy`` listens on a loopback port and forwards every connection to an upstream
address. While it runs, the test changes :class:`Toxics` at will: ``latency`` (+ random
``jitter``) before each forwarded chunk, and per chunk a chance to ``drop`` the connection
(both sides closed, FIN) or ``reset`` it (both sides aborted with RST). ``reset_all()``
resets every live connection at once; ``refuse`` resets new connections as they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
from collections import Counter
from dataclasses import dataclass, field

from rms.devstack.embedded import free_port

CHUNK = 65536
CONNECT_SECONDS = 10.0  # to the upstream; past it the client's connection is reset


@dataclass
class Toxics:
    latency: float = 0.0
    jitter: float = 0.0
    drop: float = 0.0  # chance per chunk
    reset: float = 0.0  # chance per chunk
    refuse: bool = False

    def delay(self, rng: random.Random) -> float:
        return self.latency + (rng.uniform(0, self.jitter) if self.jitter else 0.0)


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter

    def close(self, hard: bool) -> None:
        for writer in (self.client, self.upstream):
            if hard:
                abort(writer)
            else:
                writer.close()


def abort(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0) instead of FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass
class FaultProxy:
    upstream_port: int
    upstream_host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    toxics: Toxics = field(default_factory=Toxics)
    seed: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    _links: set[_Link] = field(default_factory=set)
    _connecting: set[asyncio.StreamWriter] = field(default_factory=set)  # upstream not yet open
    _server: asyncio.Server | None = None

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port,
                                                  reuse_address=True)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.reset_all(count=False)
            await self._server.wait_closed()
            self._server = None

    def heal(self) -> None:
        self.toxics = Toxics()

    def reset_all(self, count: bool = True) -> int:
        """RST every live connection; returns how many."""
        links = list(self._links)
        for link in links:
            link.close(hard=True)
        self._links.clear()
        for writer in list(self._connecting):
            abort(writer)
        if count and links:
            self.injected["reset"] += len(links)
        return len(links)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.toxics.refuse:
            self.injected["refused"] += 1
            abort(writer)
            return
        self._connecting.add(writer)
        try:
            async with asyncio.timeout(CONNECT_SECONDS):
                up_reader, up_writer = await asyncio.open_connection(self.upstream_host,
                                                                     self.upstream_port)
        except (OSError, TimeoutError):
            abort(writer)
            return
        finally:
            self._connecting.discard(writer)
        if writer.is_closing():  # reset while it was connecting
            abort(up_writer)
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        try:
            await asyncio.gather(self._pump(reader, up_writer, link),
                                 self._pump(up_reader, writer, link))
        finally:
            self._links.discard(link)
            link.close(hard=False)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    link: _Link) -> None:
        """Forward one direction. A clean end (FIN) is passed on as a FIN; an error (reset,
        write to a closed peer) resets both sides, as a real connection would: a link left
        half-open would keep the server's session, its open transaction and its row locks
        alive after the client has gone."""
        try:
            while data := await reader.read(CHUNK):
                if self._fault(link):
                    return
                delay = self.toxics.delay(self._rng)
                if delay:
                    await asyncio.sleep(delay)
                if writer.is_closing():
                    raise ConnectionResetError("peer closed")
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            link.close(hard=True)

    def _fault(self, link: _Link) -> bool:
        """Maybe drop or reset ``link`` now; True when it was."""
        roll = self._rng.random()
        if roll < self.toxics.reset:
            self.injected["reset"] += 1
            link.close(hard=True)
            return True
        if roll < self.toxics.reset + self.toxics.drop:
            self.injected["drop"] += 1
            link.close(hard=False)
            return True
        return False
