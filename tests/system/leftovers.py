"""What a harness (``rms bench``, the soak) left running after it was told to stop: its
descendants and every process whose command line names its work folder (PostgreSQL is a
daemon of ``pg_ctl``, no descendant; Kafka's JVMs name their log folders)."""

from __future__ import annotations

import os
import time

import psutil


def of_the_run(pid: int, work_dir: str) -> set[psutil.Process]:
    """The harness's descendants and the processes naming ``work_dir``, now."""
    return set(psutil.Process(pid).children(recursive=True)) | naming(work_dir, pid)


def naming(work_dir: str, but: int) -> set[psutil.Process]:
    return {process for process in psutil.process_iter(["cmdline"])
            if process.pid != but and work_dir in " ".join(process.info["cmdline"] or ())}


def running(processes: set[psutil.Process], argument: str) -> bool:
    """One of ``processes`` has ``argument`` as a whole argument (``serve``: ``rms serve``, not
    Kafka's ``server.properties``)."""
    for process in processes:
        try:
            if argument in process.cmdline():
                return True
        except psutil.NoSuchProcess:
            pass
    return False


def alive(processes: set[psutil.Process]) -> list[str]:
    """The command lines of those still running (zombies are gone for this purpose)."""
    left = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(process.cmdline())[:200])
        except psutil.NoSuchProcess:
            pass
    return left


def wait_all_gone(started: set[psutil.Process], work_dir: str, seconds: float) -> None:
    """Every one of ``started`` and of the processes naming ``work_dir`` ends within
    ``seconds``; an AssertionError names those left."""
    deadline = time.monotonic() + seconds
    while left := alive(started | naming(work_dir, os.getpid())):
        assert time.monotonic() < deadline, left
        time.sleep(0.2)
