"""``rms bench`` on its own stack stops everything it started when it is told to stop: sent
SIGTERM while it measures, it leaves none of its processes (PostgreSQL, Kafka, ``rms serve``,
the consumer, the callback server) running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.system.leftovers import of_the_run, running, wait_all_gone

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_while_measuring_leaves_no_process_of_the_bench(tmp_path: Path) -> None:
    log = tmp_path / "bench.out"
    with log.open("wb") as out:
        bench = subprocess.Popen(
            [sys.executable, "-m", "rms.cli", "bench", "--paths", "happy", "--concurrency", "1",
             "--rate", "1", "--duration", "120", "--out", str(tmp_path / "bench.json")],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        marker = "rms bench: measuring (work dir "
        while marker not in log.read_text():
            assert bench.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        work_dir = log.read_text().split(marker, 1)[1].split(")", 1)[0]
        started = of_the_run(bench.pid, work_dir)
        assert running(started, "serve"), started
        assert any("postgres" in p.name() for p in started), started
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(120) == 130, log.read_text()
        wait_all_gone(started, work_dir, 30)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
