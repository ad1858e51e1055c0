"""The harness's bounded waits: a step past its bound fails as a Stall naming it, after a dump
that shows the harness's own tasks first, each with its whole chain of awaits."""

from __future__ import annotations

import asyncio
import io

import pytest

from tests.system.faults.bounds import Stall, bounded, dump_tasks


async def _innermost_wait(forever: asyncio.Event) -> None:
    await forever.wait()


async def _outer_step(forever: asyncio.Event) -> None:
    await _innermost_wait(forever)


async def test_a_step_past_its_bound_is_a_stall_naming_it(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    with pytest.raises(Stall, match=r"the producers' last messages: not done within 0\.05s"):
        await bounded(_outer_step(asyncio.Event()), 0.05, "the producers' last messages")
    dump = capsys.readouterr().err
    assert "stalled: the producers' last messages" in dump
    # the whole chain down to the innermost await, not the outermost frame alone
    assert "in _outer_step" in dump and "in _innermost_wait" in dump


async def test_the_steps_own_timeout_is_not_reported_as_a_stall() -> None:
    async def own_timeout() -> None:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(1)

    with pytest.raises(TimeoutError) as raised:
        await bounded(own_timeout(), 5.0, "a step with its own timeout")
    assert not isinstance(raised.value, Stall)


async def test_a_step_within_its_bound_returns_its_value() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert await bounded(answer(), 1.0, "a quick step") == 42


async def test_the_dump_lists_the_harness_tasks_before_the_others() -> None:
    forever = asyncio.Event()
    foreign = asyncio.get_running_loop().create_task(
        asyncio.sleep(60), name="a-foreign-task")  # a library's task: no frame of tests/
    harness = asyncio.create_task(_outer_step(forever), name="a-harness-task")
    await asyncio.sleep(0)
    out = io.StringIO()
    dump_tasks("test", out)
    text = out.getvalue()
    assert text.index("a-harness-task (harness)") < text.index("a-foreign-task")
    assert "in _innermost_wait" in text
    for task in (foreign, harness):
        task.cancel()
    await asyncio.gather(foreign, harness, return_exceptions=True)
