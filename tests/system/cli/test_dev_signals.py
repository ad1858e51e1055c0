"""``rms dev`` never leaves orphans: whether it is interrupted with its output going into a
broken pipe (``make dev | tee log``, tee killed first), its terminal closes (SIGHUP), it is
asked to stop (SIGTERM) or killed outright (SIGKILL), every process it started (API, workers,
Apache Kafka, PostgreSQL) is gone soon after and its port is free for the next run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from rms.devstack.embedded import free_port

ROOT = Path(__file__).resolve().parents[3]
GONE_WITHIN = 30.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _start(data_dir: Path, port: int, output: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    return subprocess.Popen([sys.executable, "-m", "rms.cli", "dev", "--no-demo", "--port",
                             str(port), "--data-dir", str(data_dir)],
                            env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)


def _wait_started(dev: subprocess.Popen[bytes], reader: Any, port: int) -> None:
    """Until the banner says every process is up (the workers start after the API answers)."""
    deadline, said = time.monotonic() + 90, b""
    while b"Press Ctrl-C to stop." not in said:
        assert dev.poll() is None, f"rms dev exited with {dev.returncode}: {said[-2000:]!r}"
        assert time.monotonic() < deadline, f"rms dev did not start: {said[-2000:]!r}"
        said += reader.read() or b""
        time.sleep(0.2)
    assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200


def _everything_it_started(dev: subprocess.Popen[bytes], data_dir: Path) -> list[psutil.Process]:
    started = psutil.Process(dev.pid).children(recursive=True)
    postmaster = int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
    server = psutil.Process(postmaster)
    return [*started, server, *server.children(recursive=True)]


def _running(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _described(process: psutil.Process) -> str:
    """``pid name`` of a process that may end meanwhile."""
    try:
        return f"{process.pid} {process.name()}"
    except psutil.NoSuchProcess:
        return f"{process.pid} (gone)"


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.parametrize("how", ["sigint-broken-pipe", "sighup", "sigterm", "sigkill"])
def test_every_child_goes_with_rms_dev(tmp_path: Path, how: str) -> None:
    data_dir, port = tmp_path / "dev", free_port()
    read_end, write_end = os.pipe()
    dev = _start(data_dir, port, write_end)
    os.close(write_end)
    reader = os.fdopen(read_end, "rb", buffering=0)
    try:
        os.set_blocking(read_end, False)
        _wait_started(dev, reader, port)
        children = _everything_it_started(dev, data_dir)
        names = {p.name() for p in children}
        assert {"java", "postgres"} <= names, names
        assert len(children) >= 6, names  # api, 2 workers, kafka, postgres and its helpers

        if how == "sigint-broken-pipe":
            reader.close()  # the reader of its output (tee) is gone first
            dev.send_signal(signal.SIGINT)
        else:
            dev.send_signal({"sighup": signal.SIGHUP, "sigterm": signal.SIGTERM,
                             "sigkill": signal.SIGKILL}[how])

        deadline = time.monotonic() + GONE_WITHIN
        while any(_running(p) for p in children) or dev.poll() is None:
            left = [_described(p) for p in children if _running(p)]
            assert time.monotonic() < deadline, f"still running after {how}: {left}"
            time.sleep(0.2)
        assert _port_free(port)
        if how != "sigkill":
            assert dev.returncode == 0, dev.returncode
    finally:
        if not reader.closed:
            reader.close()
        if dev.poll() is None:
            dev.kill()
            dev.wait(10)


def _started(data_dir: Path, port: int) -> tuple[subprocess.Popen[bytes], Any]:
    read_end, write_end = os.pipe()
    dev = _start(data_dir, port, write_end)
    os.close(write_end)
    os.set_blocking(read_end, False)
    reader = os.fdopen(read_end, "rb", buffering=0)
    _wait_started(dev, reader, port)
    return dev, reader


def _stop(dev: subprocess.Popen[bytes], reader: Any) -> None:
    if dev.poll() is None:
        dev.send_signal(signal.SIGINT)
        dev.wait(60)
    reader.close()


def test_a_second_rms_dev_on_the_same_folder_is_refused_and_harms_nothing(
        tmp_path: Path) -> None:
    data_dir, port = tmp_path / "dev", free_port()
    first, reader = _started(data_dir, port)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "rms.cli", "dev", "--no-demo", "--port", str(free_port()),
             "--data-dir", str(data_dir)], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"rms dev is already running on {data_dir} (pid {first.pid})" in second.stderr
        assert "Traceback" not in second.stderr + second.stdout
        time.sleep(2)  # whatever the refused run might have stopped would be gone by now
        assert first.poll() is None
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    finally:
        _stop(first, reader)


def test_a_run_started_right_after_a_killed_one_waits_for_its_clean_up(tmp_path: Path) -> None:
    """The killed run's watchdog must not stop the next run's PostgreSQL or processes."""
    data_dir, port = tmp_path / "dev", free_port()
    first, reader = _started(data_dir, port)
    first.kill()
    first.wait(10)
    reader.close()
    second, reader = _started(data_dir, port)  # waits for the lock, then starts on a clean slate
    try:
        time.sleep(3)
        assert second.poll() is None
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    finally:
        _stop(second, reader)
