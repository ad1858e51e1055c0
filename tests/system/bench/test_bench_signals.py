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

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[3]


def _of_the_run(pid: int, work_dir: str) -> set[psutil.Process]:
    """The bench's descendants and every process that names its work dir (PostgreSQL is a
    daemon of ``pg_ctl``: no descendant)."""
    return set(psutil.Process(pid).children(recursive=True)) | _naming(work_dir, pid)


def _naming(work_dir: str, but: int) -> set[psutil.Process]:
    return {process for process in psutil.process_iter(["cmdline"])
            if process.pid != but and work_dir in " ".join(process.info["cmdline"] or ())}


def _alive(processes: set[psutil.Process]) -> list[str]:
    left = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(process.cmdline())[:200])
        except psutil.NoSuchProcess:
            pass
    return left


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
        started = _of_the_run(bench.pid, work_dir)
        assert any("serve" in " ".join(p.cmdline()) for p in started), started
        assert any("postgres" in p.name() for p in started), started
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(120) == 130, log.read_text()
        deadline = time.monotonic() + 30
        while _alive(started | _naming(work_dir, os.getpid())):
            assert time.monotonic() < deadline, _alive(started)
            time.sleep(0.2)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
