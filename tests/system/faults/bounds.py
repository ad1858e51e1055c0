"""Every wait of the fault harness is bounded: a step that does not end within its bound fails
loudly as a :class:`Stall` naming what it waited for, after printing where every asyncio task
of the process waits (the harness's own tasks first, each with its whole chain of awaits)."""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback
from collections.abc import Awaitable, Iterator
from pathlib import Path
from types import CoroutineType, FrameType, GeneratorType
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

TESTS = str(Path(__file__).resolve().parents[2])  # frames of the harness (and test helpers)


class Stall(AssertionError):
    """A harness step that did not end within its bound (a hang, reported instead of waited)."""


async def bounded(awaitable: Awaitable[T], seconds: float, what: str) -> T:
    """``await awaitable``, or :class:`Stall` after ``seconds``: the tasks are dumped at the
    bound, while everything still waits where it hangs, then the step is cancelled."""
    task = asyncio.current_task()
    assert task is not None, "bounded() runs in a task"
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        dump_tasks(f"stalled: {what} (bound {seconds:g}s)")
        task.cancel()

    timer = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if expired and task.uncancel() == 0:  # this bound's cancel, no one else's
            raise Stall(f"{what}: not done within {seconds:g}s") from None
        raise
    finally:
        timer.cancel()


def dump_tasks(title: str, file: TextIO | None = None) -> None:
    """Where each task of the running loop waits: the harness's first, then the others
    (Kafka clients, servers), each as its chain of awaits down to the future. Tasks waiting in
    the same chain (a proxy's hundred pumps) are printed once, with their number, the rarest
    first: the step that hangs is not lost behind them."""
    out = file or sys.stderr
    groups: dict[tuple[bool, tuple[str, ...]], list[asyncio.Task[Any]]] = {}
    for task in asyncio.all_tasks():
        groups.setdefault((_is_harness(task), tuple(await_chain(task))), []).append(task)
    print(f"--- {title}: {sum(map(len, groups.values()))} asyncio tasks, the harness's first "
          f"---", file=out)
    for (harness, chain), tasks in sorted(groups.items(),
                                          key=lambda g: (not g[0][0], len(g[1]))):
        names = ", ".join(t.get_name() for t in tasks[:3]) + (", ..." if len(tasks) > 3 else "")
        print(f"{len(tasks)} task(s) {names}{' (harness)' if harness else ''}:", file=out)
        for line in chain:
            print(f"    {line}", file=out)
    _dump_threads(out)
    print("--- end of tasks ---", file=out, flush=True)


def _dump_threads(out: TextIO) -> None:
    """The other threads (``asyncio.to_thread`` workers: a blocking call that never returns)."""
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        if thread is threading.current_thread() or frame is None:
            continue
        print(f"thread {thread.name}:", file=out)
        for line in traceback.format_stack(frame)[-12:]:
            print("    " + line.rstrip().replace("\n", "\n    "), file=out)


def await_chain(task: asyncio.Task[Any]) -> list[str]:
    """The task's coroutine and what it awaits, down to the innermost frame and the future it
    is suspended on (``Task.print_stack`` shows one frame of a suspended coroutine)."""
    lines = [f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
             for frame in _frames(task.get_coro())]
    waiting = getattr(task, "_fut_waiter", None)
    if waiting is not None:
        lines.append(f"waits on {type(waiting).__name__}")
    return lines or [repr(task)[:300]]


def _is_harness(task: asyncio.Task[Any]) -> bool:
    return any(frame.f_code.co_filename.startswith(TESTS) for frame in _frames(task.get_coro()))


def _frames(awaitable: object) -> Iterator[FrameType]:
    seen = 0
    while awaitable is not None and seen < 200:
        seen += 1
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "gi_frame", None) \
            or getattr(awaitable, "ag_frame", None)
        if isinstance(frame, FrameType):
            yield frame
        if isinstance(awaitable, CoroutineType):
            awaitable = awaitable.cr_await
        elif isinstance(awaitable, GeneratorType):
            awaitable = awaitable.gi_yieldfrom
        else:
            awaitable = getattr(awaitable, "ag_await", None) or getattr(awaitable, "cr_await",
                                                                        None)
