"""The ``service`` fixture of the dashboard's browser tests: ``rms serve`` on a free port."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rms.devstack.embedded import free_port
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.system.dashboard.browser import ADMIN_TOKEN, ROOT, Service, wait_ready
from tests.system.dashboard.summary_fixture import write_summary


@pytest.fixture
def service(database_url: str, kafka: EmbeddedKafka, unique: str,
            tmp_path: Path) -> Iterator[Service]:
    """``rms serve`` on a free port, with RMS_REPORT_DIR holding a report summary."""
    write_summary(tmp_path / "report")
    port = free_port()
    env = os.environ | {
        "RMS_DATABASE_URL": database_url,
        "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
        "RMS_REPORT_DIR": str(tmp_path / "report"),
        "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
        "RMS_ACK_TOPIC": f"rms.acks.{unique}",
        "RMS_ACK_CONSUMER_GROUP": f"rms-acks-{unique}",
    }
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "rms.cli", "serve", "--port", str(port)],
                               env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base_url, timeout=10.0) as client:
            wait_ready(client, process, tmp_path / "serve.log")
            yield Service(base_url, client)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
