"""The write coalescer's logic (rms.store.batching), with a fake flush: batching under
concurrency, no waiting for a lone request, bounded parallel flushes, and per-item answers when
a batch fails."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rms.store.batching import Coalescer


class Recorder:
    """A flush that doubles numbers, records each batch, and refuses negative numbers (the
    whole batch fails, as a statement does when PostgreSQL refuses one row)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.batches: list[list[int]] = []
        self.delay = delay
        self.running = 0
        self.most_running = 0

    async def flush(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await asyncio.sleep(self.delay)
            if any(item < 0 for item in items):
                raise ValueError(f"refused {min(items)}")
            return [item * 2 for item in items]
        finally:
            self.running -= 1


async def test_a_lone_request_is_flushed_at_once_alone() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.flush, max_batch=100, max_inflight=1)
    assert await coalescer.submit(21) == 42
    assert recorder.batches == [[21]]


async def test_requests_arriving_during_a_flush_share_the_next_one() -> None:
    recorder = Recorder(delay=0.05)
    coalescer = Coalescer(recorder.flush, max_batch=100, max_inflight=1)
    results = await asyncio.gather(*(coalescer.submit(n) for n in range(50)))
    assert results == [n * 2 for n in range(50)]
    # the first submit starts a flush of its own; the other 49 wait and go together
    assert recorder.batches == [[0], list(range(1, 50))]


async def test_batches_are_capped_and_parallel_flushes_bounded() -> None:
    recorder = Recorder(delay=0.02)
    coalescer = Coalescer(recorder.flush, max_batch=10, max_inflight=3)
    results = await asyncio.gather(*(coalescer.submit(n) for n in range(100)))
    assert results == [n * 2 for n in range(100)]
    assert max(len(batch) for batch in recorder.batches) <= 10
    assert recorder.most_running == 3
    assert sorted(n for batch in recorder.batches for n in batch) == list(range(100))


async def test_a_failed_batch_answers_every_item_on_its_own() -> None:
    recorder = Recorder(delay=0.02)
    coalescer = Coalescer(recorder.flush, max_batch=100, max_inflight=1)
    outcomes = await asyncio.gather(*(coalescer.submit(n) for n in [1, 2, -3, 4, 5]),
                                    return_exceptions=True)
    assert outcomes[:2] == [2, 4] and outcomes[3:] == [8, 10]
    assert isinstance(outcomes[2], ValueError) and "refused -3" in str(outcomes[2])
    # [1] alone, then [2, -3, 4, 5] failed as a batch and was retried one by one
    assert recorder.batches[:2] == [[1], [2, -3, 4, 5]]
    assert sorted(map(tuple, recorder.batches[2:])) == [(-3,), (2,), (4,), (5,)]


async def test_a_lone_failing_item_is_not_run_twice() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.flush, max_batch=100, max_inflight=1)
    with pytest.raises(ValueError, match="refused -1"):
        await coalescer.submit(-1)
    assert recorder.batches == [[-1]]


async def test_a_cancelled_flush_does_not_leave_requests_hanging() -> None:
    started = asyncio.Event()

    async def stuck(items: Sequence[int]) -> list[int]:
        started.set()
        await asyncio.sleep(3600)
        return list(items)

    coalescer: Coalescer[int, int] = Coalescer(stuck, max_batch=100, max_inflight=1)
    waiting = asyncio.ensure_future(coalescer.submit(1))
    await started.wait()
    for task in list(coalescer._running):
        task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 5)


async def test_an_error_of_the_whole_batch_is_everyones_answer_without_retries() -> None:
    recorder = Recorder(delay=0.02)
    coalescer = Coalescer(recorder.flush, max_batch=100, max_inflight=1,
                          item_specific=lambda exc: "refused -3" in str(exc))
    outcomes = await asyncio.gather(*(coalescer.submit(n) for n in [1, 2, -4, 5]),
                                    return_exceptions=True)
    assert outcomes[0] == 2
    assert all(isinstance(o, ValueError) and "refused -4" in str(o) for o in outcomes[1:])
    assert recorder.batches == [[1], [2, -4, 5]]  # no one-by-one retries
