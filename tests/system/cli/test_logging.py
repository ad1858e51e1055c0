"""One log format per process: with RMS_LOG_JSON every line of ``rms serve`` is a JSON object,
uvicorn's and aiokafka's lines included (with their logger's name)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from rms.devstack.embedded import free_port

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(60)
def test_every_line_of_a_process_is_json(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")} | {
        "RMS_DATABASE_URL": "postgresql+asyncpg://rms@127.0.0.1:1/rms",
        "RMS_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "RMS_ADMIN_TOKEN": "a-long-admin-token",
        "RMS_LOG_JSON": "true"}
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        serve = subprocess.Popen([sys.executable, "-m", "rms.cli", "serve", "--port",
                                  str(free_port())], env=env, cwd=ROOT, stdout=sink,
                                 stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while log.read_bytes().count(b"aiokafka") < 1 or b"uvicorn" not in log.read_bytes():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        serve.terminate()
        serve.wait(15)
    lines = [line for line in log.read_bytes().splitlines() if line.strip()]
    records = [orjson.loads(line) for line in lines]  # fails on any line that is not JSON
    assert all({"event", "level", "timestamp"} <= set(r) for r in records)
    loggers = {r.get("logger") for r in records}
    assert {"uvicorn.error", "aiokafka"} <= loggers, loggers
