"""Write coalescing: concurrent requests that each need one row written share one statement and
one commit.

A request hands its item to :meth:`Coalescer.submit` and awaits its own result. When fewer than
``max_inflight`` flushes are running, everything waiting is flushed at once; items arriving
meanwhile wait for the next flush. There is no timer: a lone request is flushed immediately
(latency as without coalescing), and under load batches grow by themselves to what arrives
during one statement plus its commit, which is where the throughput comes from (one fsync and
one round trip for many rows).

A flush that raises an error ``item_specific`` accepts (a row PostgreSQL refuses, a deadlock
between two multi-row statements) is retried item by item, so each request gets its own answer
and one bad item never fails the others. Any other error (no connection in time, the connection
lost) is every item's answer at once: retrying each alone would multiply the load exactly when
the database is short of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

Flush = Callable[[Sequence[In]], Awaitable[Sequence[Out]]]


@dataclass(slots=True)
class _Waiting(Generic[In, Out]):
    item: In
    future: asyncio.Future[Out]


@dataclass
class Coalescer(Generic[In, Out]):
    """``flush(items)`` must return one result per item, in order, or raise for the batch."""

    flush: Flush[In, Out]
    max_batch: int = 500
    max_inflight: int = 4
    item_specific: Callable[[Exception], bool] = lambda _: True
    _waiting: list[_Waiting[In, Out]] = field(default_factory=list)
    _running: set[asyncio.Task[None]] = field(default_factory=set)

    async def submit(self, item: In) -> Out:
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Waiting(item, future))
        self._start_flushes()
        return await future

    def _start_flushes(self) -> None:
        while self._waiting and len(self._running) < self.max_inflight:
            batch, self._waiting = (self._waiting[: self.max_batch],
                                    self._waiting[self.max_batch:])
            task = asyncio.create_task(self._run(batch), name="coalesced-flush")
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._start_flushes()

    async def _run(self, batch: list[_Waiting[In, Out]]) -> None:
        try:
            results = await self.flush([w.item for w in batch])
        except Exception as exc:
            if len(batch) == 1 or not self.item_specific(exc):
                _fail(batch, exc)
            else:
                await asyncio.gather(*(self._run_alone(w) for w in batch))
            return
        except BaseException as exc:  # cancelled: the waiting requests must not hang
            _fail(batch, exc)
            raise
        for waiting, result in zip(batch, results, strict=True):
            if not waiting.future.done():
                waiting.future.set_result(result)

    async def _run_alone(self, waiting: _Waiting[In, Out]) -> None:
        try:
            (result,) = await self.flush([waiting.item])
        except BaseException as exc:
            _fail([waiting], exc)
            if not isinstance(exc, Exception):
                raise
            return
        if not waiting.future.done():
            waiting.future.set_result(result)


def _fail(batch: Sequence[_Waiting[In, Out]], exc: BaseException) -> None:
    for waiting in batch:
        if not waiting.future.done():
            if isinstance(exc, Exception):
                waiting.future.set_exception(exc)
            else:
                waiting.future.cancel()
