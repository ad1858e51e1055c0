"""A harness's stop signal ends its asyncio run wherever it lands (rms.devstack.reaper): inside
a task, and inside a plain callback (a protocol's data handler, a ``call_soon``), where asyncio
logs and drops any exception but ``KeyboardInterrupt`` and ``SystemExit``. The harness's
clean-up runs and it exits 130, long before what it was waiting for would have ended."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

_HARNESS = """
import asyncio, os, signal, sys
from rms.devstack.reaper import Stopped, stop_on_signals

stop_on_signals()

async def main(where):
    loop = asyncio.get_running_loop()
    kill = lambda: os.kill(os.getpid(), signal.SIGTERM)
    if where == "callback":
        loop.call_later(0.2, kill)
    else:
        async def in_task():
            await asyncio.sleep(0.2)
            kill()
        asyncio.ensure_future(in_task())
    try:
        await asyncio.sleep(60)
    finally:
        print("cleaned up", flush=True)

try:
    asyncio.run(main(sys.argv[1]))
except Stopped:
    print("stopped", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("where", ["callback", "task"])
def test_a_stop_signal_ends_the_run_and_its_clean_up_runs(where: str) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _HARNESS, where], capture_output=True,
                          text=True, timeout=30)
    assert (done.returncode, done.stdout.split()) == (130, ["cleaned", "up", "stopped"]), (
        done.stdout, done.stderr[-2000:])
    assert time.monotonic() - started < 20  # the signal, not the 60 s sleep, ended it
