"""The coalescing writer (rms.batching): concurrent submits share flushes, one flush at a
time, a failing flush falls back to one write per item, a cancelled caller cancels nothing."""

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
