"""Group commit for concurrent callers: many coroutines each hand one item to a
:class:`Coalescer` and wait for its own result, while the coalescer writes the items with one
statement per flush (the request path's prepares and transitions, the Dispatcher's publish
bookkeeping, the confirm worker's answers).

There is no timer. When fewer than ``max_inflight`` flushes are running, everything waiting is
flushed at once; items arriving meanwhile wait for the next flush. A lone caller is written at
once (latency as without coalescing), and under load a flush carries whatever arrived during
the previous one, which is where the throughput comes from (one round trip and one commit for
many rows).

A flush that fails with an error ``item_specific`` accepts (a row PostgreSQL refuses, a
deadlock between two multi-row statements) is retried item by item, one at a time, so each
caller gets its own answer and one bad item fails only its own caller. Any other error (no
pooled connection in time, the connection lost) is every item's answer at once: retrying each
alone would multiply the load exactly when the database is short of it. A cancelled caller
cancels only its own wait, never a flush others wait for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import structlog

log = structlog.get_logger(__name__)
In = TypeVar("In")
Out = TypeVar("Out")
Flush = Callable[[Sequence[In]], Awaitable[Sequence[Out]]]
Waiting = tuple[In, "asyncio.Future[Out]"]


def any_error(_: Exception) -> bool:
    return True


class Coalescer(Generic[In, Out]):
    """``flush(items)`` returns one result per item, in order, or raises for the batch."""

    def __init__(self, flush: Flush[In, Out], *, name: str, max_items: int = 1000,
                 max_inflight: int = 1,
                 item_specific: Callable[[Exception], bool] = any_error) -> None:
        self._flush = flush
        self._name = name
        self._max_items = max_items
        self._max_inflight = max_inflight
        self._item_specific = item_specific
        self._waiting: list[Waiting[In, Out]] = []
        self._running: set[asyncio.Task[None]] = set()
        self._starting = 0  # flush tasks created that have not taken their batch yet

    async def submit(self, item: In) -> Out:
        """Write ``item`` (in some flush) and return its result; raises what writing it raised.
        The caller waits on its own future (no ``gather`` around one future)."""
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        self._start_flushes()
        return await future

    async def submit_many(self, items: Sequence[In]) -> list[Out]:
        """Write ``items`` (in the same or in successive flushes); one result per item."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Out]] = [loop.create_future() for _ in items]
        self._waiting.extend(zip(items, futures, strict=True))
        self._start_flushes()
        return list(await asyncio.gather(*futures))

    def _start_flushes(self) -> None:
        """Start a flush task unless one is about to start (it will take everything waiting
        when it runs, so callers of the same event-loop turn share it) or enough run."""
        if self._waiting and not self._starting and len(self._running) < self._max_inflight:
            self._starting += 1
            task = asyncio.create_task(self._drain(), name=f"flush-{self._name}")
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        """A task that saw nothing waiting may still be counted as running when a caller comes
        (between its last look and this callback): that caller's item is flushed from here."""
        self._running.discard(task)
        self._start_flushes()

    async def _drain(self) -> None:
        self._starting -= 1
        while self._waiting:
            batch = self._waiting[:self._max_items]
            del self._waiting[:self._max_items]
            self._start_flushes()  # the rest, or whatever comes during this flush
            await self._run(batch)

    async def _run(self, batch: list[Waiting[In, Out]]) -> None:
        try:
            results = await self._flush([item for item, _ in batch])
        except Exception as exc:
            if len(batch) == 1 or not self._item_specific(exc):
                _settle(batch, exc)
                return
            log.warning("batch.flush_failed", writer=self._name, items=len(batch),
                        error=f"{type(exc).__name__}: {exc}", fallback="one by one")
            for waiting in batch:
                await self._run([waiting])
            return
        except BaseException as exc:  # cancelled: the callers must not wait forever
            _settle(batch, exc)
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)


def _settle(batch: Sequence[Waiting[In, Out]], exc: BaseException) -> None:
    for _, future in batch:
        if future.done():
            continue
        if isinstance(exc, Exception):
            future.set_exception(exc)
        else:
            future.cancel()
