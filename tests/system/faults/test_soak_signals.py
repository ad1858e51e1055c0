"""The soak stops everything it started when it is told to stop: sent SIGTERM once its servers
run and the rolling upgrade's processes serve, it exits 130 and leaves none of its processes
(three PostgreSQL servers, five Kafka brokers, the previous release's ``rms serve`` and
workers, the fault proxies) running."""

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
@pytest.mark.timeout(600)
def test_sigterm_while_soaking_leaves_no_process_of_the_soak(tmp_path: Path) -> None:
    base = tmp_path / "soak"
    log = tmp_path / "soak.out"
    with log.open("wb") as out:
        soak = subprocess.Popen(
            [sys.executable, "-m", "tests.system.faults.soak", "--seconds", "600",
             "--base", str(base)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 420
        while not running(of_the_run(soak.pid, str(base)), "serve"):
            assert soak.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        started = of_the_run(soak.pid, str(base))
        assert any("postgres" in p.name() for p in started), started
        assert any("kafka" in " ".join(p.cmdline()) for p in started), started
        soak.send_signal(signal.SIGTERM)
        assert soak.wait(120) == 130, log.read_text()
        assert "soak: stopped by SIGTERM" in log.read_text()
        wait_all_gone(started, str(base), 30)
    finally:
        if soak.poll() is None:
            os.killpg(soak.pid, signal.SIGKILL)
