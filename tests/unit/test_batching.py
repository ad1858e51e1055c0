"""The coalescing writer (rms.batching), with fake flushes: concurrent submits share flushes,
a lone submit is flushed at once, parallel flushes are bounded, a failing flush falls back to
one write per item (only for item-specific errors), a cancelled caller cancels nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rms.batching import Coalescer


class Writer:
    """Records the batches it was given; fails a batch that holds a "bad" item."""

    def __init__(self, delay: float = 0.01) -> None:
        self.batches: list[list[str]] = []
        self.delay = delay

    async def write(self, items: Sequence[str]) -> list[str]:
        self.batches.append(list(items))
        await asyncio.sleep(self.delay)
        if "bad" in items:
            raise RuntimeError("constraint violated")
        return [item.upper() for item in items]


async def test_calls_arriving_during_a_flush_share_the_next_one() -> None:
    writer = Writer()
    coalescer: Coalescer[str, str] = Coalescer(writer.write, name="test")
    first = asyncio.create_task(coalescer.submit("a"))
    await asyncio.sleep(0)  # the first flush starts with "a" alone
    rest = [asyncio.create_task(coalescer.submit(item)) for item in "bcdef"]
    assert await asyncio.gather(first, *rest) == list("ABCDEF")
    assert writer.batches == [["a"], list("bcdef")]


async def test_a_bad_item_fails_only_its_own_caller() -> None:
    writer = Writer()
    coalescer: Coalescer[str, str] = Coalescer(writer.write, name="test")
    await asyncio.gather(coalescer.submit("warm-up"))
    calls = [coalescer.submit(item) for item in ("x", "bad", "y")]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert results[0] == "X" and results[2] == "Y"
    assert isinstance(results[1], RuntimeError)
    # the joint flush failed, then each item was written on its own
    assert writer.batches[1:] == [["x", "bad", "y"], ["x"], ["bad"], ["y"]]


async def test_submit_many_keeps_order_and_respects_max_items() -> None:
    writer = Writer(delay=0)
    coalescer: Coalescer[str, str] = Coalescer(writer.write, name="test", max_items=2)
    assert await coalescer.submit_many(list("abcde")) == list("ABCDE")
    assert writer.batches == [["a", "b"], ["c", "d"], ["e"]]


async def test_a_cancelled_caller_does_not_cancel_the_flush() -> None:
    writer = Writer(delay=0.05)
    coalescer: Coalescer[str, str] = Coalescer(writer.write, name="test")
    impatient = asyncio.create_task(coalescer.submit("a"))
    patient = asyncio.create_task(coalescer.submit("b"))
    await asyncio.sleep(0.01)
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    assert await patient == "B"
    assert writer.batches == [["a", "b"]]


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
    coalescer = Coalescer(recorder.flush, name="test", max_items=100, max_inflight=1)
    assert await coalescer.submit(21) == 42
    assert recorder.batches == [[21]]


async def test_requests_arriving_during_a_flush_share_the_next_one() -> None:
    recorder = Recorder(delay=0.05)
    coalescer = Coalescer(recorder.flush, name="test", max_items=100, max_inflight=1)
    results = await asyncio.gather(*(coalescer.submit(n) for n in range(50)))
    assert results == [n * 2 for n in range(50)]
    # submitted in the same event-loop turn: one flush
    assert recorder.batches == [list(range(50))]
    first = asyncio.ensure_future(coalescer.submit(100))
    await asyncio.sleep(0.01)  # its flush is running: the next ones wait for the next flush
    assert await asyncio.gather(first, *(coalescer.submit(n) for n in range(3))) == [200, 0, 2, 4]
    assert recorder.batches[1:] == [[100], [0, 1, 2]]


async def test_batches_are_capped_and_parallel_flushes_bounded() -> None:
    recorder = Recorder(delay=0.02)
    coalescer = Coalescer(recorder.flush, name="test", max_items=10, max_inflight=3)
    results = await asyncio.gather(*(coalescer.submit(n) for n in range(100)))
    assert results == [n * 2 for n in range(100)]
    assert max(len(batch) for batch in recorder.batches) <= 10
    assert recorder.most_running == 3
    assert sorted(n for batch in recorder.batches for n in batch) == list(range(100))


async def test_a_failed_batch_answers_every_item_on_its_own() -> None:
    recorder = Recorder(delay=0.02)
    coalescer = Coalescer(recorder.flush, name="test", max_items=100, max_inflight=1)
    outcomes = await asyncio.gather(*(coalescer.submit(n) for n in [1, 2, -3, 4, 5]),
                                    return_exceptions=True)
    assert outcomes[:2] == [2, 4] and outcomes[3:] == [8, 10]
    assert isinstance(outcomes[2], ValueError) and "refused -3" in str(outcomes[2])
    # failed as one batch, then retried one by one, in order
    assert recorder.batches == [[1, 2, -3, 4, 5], [1], [2], [-3], [4], [5]]


async def test_a_lone_failing_item_is_not_run_twice() -> None:
    recorder = Recorder()
    coalescer = Coalescer(recorder.flush, name="test", max_items=100, max_inflight=1)
    with pytest.raises(ValueError, match="refused -1"):
        await coalescer.submit(-1)
    assert recorder.batches == [[-1]]


async def test_a_cancelled_flush_does_not_leave_requests_hanging() -> None:
    started = asyncio.Event()

    async def stuck(items: Sequence[int]) -> list[int]:
        started.set()
        await asyncio.sleep(3600)
        return list(items)

    coalescer: Coalescer[int, int] = Coalescer(stuck, name="test", max_inflight=1)
    waiting = asyncio.ensure_future(coalescer.submit(1))
    await started.wait()
    for task in list(coalescer._running):
        task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 5)


async def test_an_error_of_the_whole_batch_is_everyones_answer_without_retries() -> None:
    recorder = Recorder(delay=0.02)
    coalescer = Coalescer(recorder.flush, name="test", max_items=100, max_inflight=1,
                          item_specific=lambda exc: "refused -3" in str(exc))
    outcomes = await asyncio.gather(*(coalescer.submit(n) for n in [1, 2, -4, 5]),
                                    return_exceptions=True)
    assert all(isinstance(o, ValueError) and "refused -4" in str(o) for o in outcomes)
    assert recorder.batches == [[1, 2, -4, 5]]  # no one-by-one retries


async def test_an_item_submitted_while_the_last_flush_ends_is_not_stranded() -> None:
    """The caller's task runs after the flush task's last look at the queue but before the
    flush task is done: its item must still be flushed."""
    late: list[asyncio.Task[str]] = []

    async def flush(items: Sequence[str]) -> list[str]:
        if "trigger" in items:  # a caller whose first step runs before this task completes
            late.append(asyncio.ensure_future(coalescer.submit("late")))
        return [item.upper() for item in items]

    coalescer: Coalescer[str, str] = Coalescer(flush, name="test")
    assert await coalescer.submit("trigger") == "TRIGGER"
    assert await asyncio.wait_for(late[0], 5) == "LATE"
