"""The shared connection pool of a confirm worker, as ``concurrency`` lanes of one keep-alive
connection each.

Why not one httpx client with ``max_connections=concurrency``: httpcore's pool re-examines
every connection (with a socket poll each) for every request it assigns, which is quadratic in
the pool size; measured on a 2-CPU machine against a local producer, 64 concurrent calls
through one 64-connection pool ran about 140 calls/s, through 64 one-connection lanes about
650/s (see encode/httpx#3215). A lane also bounds concurrency: a call waits for a free lane.

A call prefers an idle lane whose connection already goes to its origin (keep-alive reuse
with many producers); otherwise it takes the least recently used lane, whose pool then
replaces its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx


@dataclass(eq=False)
class Lane:
    client: httpx.AsyncClient
    origin: str = ""


class Lanes:
    def __init__(self, count: int, make_client: Callable[[], httpx.AsyncClient]) -> None:
        self._idle = [Lane(make_client()) for _ in range(count)]
        self._all = list(self._idle)
        self._free = asyncio.Semaphore(count)

    @contextlib.asynccontextmanager
    async def lane(self, origin: str) -> AsyncIterator[httpx.AsyncClient]:
        """A client that serves only this call until the block ends."""
        async with self._free:
            lane = self._take(origin)
            try:
                yield lane.client
            finally:
                lane.origin = origin
                self._idle.append(lane)

    def _take(self, origin: str) -> Lane:
        for index in range(len(self._idle) - 1, -1, -1):
            if self._idle[index].origin == origin:
                return self._idle.pop(index)
        return self._idle.pop(0)

    async def aclose(self) -> None:
        for lane in self._all:
            await lane.client.aclose()
