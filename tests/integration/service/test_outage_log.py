"""A PostgreSQL outage under a real worker process: one warning when it starts, one line when
it ends, every failed round counted in a metric; no traceback per tick."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from rms.devstack.embedded import EmbeddedPostgres, free_port
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.store.migrate import upgrade
from tests.conftest import ADMIN_TOKEN

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(tmp_path / "pg", fsync=False)
    server.start()
    server.create_database("rms")
    upgrade(server.url("rms"))
    yield server
    server.stop("immediate")


def _metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and 'cause="database"' in line)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["recovery-worker", "confirm-worker"])
def test_a_database_outage_is_logged_once_and_counted(
        own_postgres: EmbeddedPostgres, kafka: EmbeddedKafka, tmp_path: Path, kind: str) -> None:
    metrics_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")} | {
        "RMS_DATABASE_URL": own_postgres.url("rms"), "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
        "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers, "RMS_LOG_JSON": "true",
        "RMS_WORKER_INTERVAL_SECONDS": "0.2", "RMS_DB_POOL_TIMEOUT_SECONDS": "1"}
    log_path = tmp_path / f"{kind}.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "rms.cli", kind, "--metrics-port", str(metrics_port)],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for(lambda: b'"worker.started"' in log_path.read_bytes(), 30)
        time.sleep(0.5)
        own_postgres.stop("fast")
        # several ticks against the stopped database (each counted, one line logged)
        _wait_for(lambda: _metric(metrics_port, "rms_loop_failures_total") >= 5, 30)
        failed = _metric(metrics_port, "rms_loop_failures_total")
        own_postgres.start()
        _wait_for(lambda: b'"loop.recovered"' in log_path.read_bytes(), 30)
    finally:
        worker.terminate()
        worker.wait(15)

    lines = [orjson.loads(line) for line in log_path.read_bytes().splitlines()
             if line.startswith(b"{")]
    # the worker's own loop (the process's apps repair is a loop of its own, logged alike)
    failing = [line for line in lines
               if line["event"] == "loop.failing" and line["component"] == kind]
    recovered = [line for line in lines
                 if line["event"] == "loop.recovered" and line["component"] == kind]
    assert len(failing) == 1, [(line.get("component"), line.get("cause"),
                                str(line.get("error"))[:160]) for line in failing]
    assert failing[0]["cause"] == "database" and failing[0]["level"] == "warning"
    assert "exception" not in failing[0]
    assert len(recovered) == 1 and recovered[0]["failures"] >= 5
    assert failed >= 5
    assert b"Traceback" not in log_path.read_bytes()


def _wait_for(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
