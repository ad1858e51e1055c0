"""The README's walkthrough against ``rms serve`` from this tree, on a fresh database: every
request it shows is sent and every answer compared with the one it shows
(tests/system/release/walkthrough.py; the release tests run the same against the wheel and the
image)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from rms.devstack.embedded import free_port
from rms.devstack.kafka_broker import EmbeddedKafka
from tests.support import create_topic
from tests.system.dashboard.browser import ROOT, wait_ready
from tests.system.release.walkthrough import walkthrough

ADMIN_TOKEN = "walkthrough-admin-token"
pytestmark = pytest.mark.slow


def test_the_readme_walkthrough_answers_as_it_shows(
        database_url: str, kafka: EmbeddedKafka, unique: str, tmp_path: Path) -> None:
    topic = f"orders.paid.{unique}"
    asyncio.run(create_topic(kafka.bootstrap_servers, topic))
    port = free_port()
    env = os.environ | {
        "RMS_DATABASE_URL": database_url, "RMS_KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "RMS_ADMIN_TOKEN": ADMIN_TOKEN, "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
        "RMS_ACK_TOPIC": f"rms.acks.{unique}", "RMS_ACK_CONSUMER_GROUP": f"rms-acks-{unique}"}
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "rms.cli", "serve", "--port", str(port)],
                                   env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        base_url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base_url, timeout=10.0) as client:
            wait_ready(client, process, log_path)
        walkthrough(base_url, ADMIN_TOKEN, topic)
    finally:
        process.terminate()
        process.wait(timeout=15)
