"""Group commit for concurrent callers: many coroutines each hand one item to a
:class:`Coalescer` and wait for its result, while the coalescer writes the items with one
statement per flush.

At most one flush runs at a time. Items that arrive while a flush is running wait for the next
flush, so under load a flush carries everything that arrived during the previous one (batches
grow with the load; an idle system writes each item at once, with no added delay). If a flush
fails as a whole, its items are written one by one, so one bad item fails only its own caller.
No background task outlives the work: a flush is started by a caller and the next one by the
flush before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import structlog

log = structlog.get_logger(__name__)
T = TypeVar("T")
R = TypeVar("R")
WriteMany = Callable[[Sequence[T]], Awaitable[Sequence[R]]]


class Coalescer(Generic[T, R]):
    """``write_many(items)`` returns one result per item, in order."""

    def __init__(self, write_many: WriteMany[T, R], *, name: str, max_items: int = 1000) -> None:
        self._write_many = write_many
        self._name = name
        self._max_items = max_items
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """Write ``item`` (in some flush) and return its result; raises what writing it raised."""
        [result] = await self.submit_many([item])
        return result

    async def submit_many(self, items: Sequence[T]) -> list[R]:
        """Write ``items`` (in the same or in successive flushes); one result per item."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[R]] = [loop.create_future() for _ in items]
        self._queue.extend(zip(items, futures, strict=True))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._drain(), name=f"flush-{self._name}")
        # shielded: a caller that is cancelled must not cancel the flush others wait for
        return list(await asyncio.shield(asyncio.gather(*futures)))

    async def _drain(self) -> None:
        """Flush until the queue is empty, one flush at a time."""
        try:
            while self._queue:
                batch = self._queue[:self._max_items]
                del self._queue[:self._max_items]
                await self._flush(batch)
        finally:
            self._flushing = None

    async def _flush(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self._write_many([item for item, _ in batch])
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][1], exc)
                return
            log.warning("batch.flush_failed", writer=self._name, items=len(batch),
                        error=f"{type(exc).__name__}: {exc}", fallback="one by one")
            for pair in batch:
                await self._flush([pair])
            return
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)


def _settle(future: asyncio.Future[R], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
