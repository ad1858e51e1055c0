"""The API served by a real uvicorn in a background thread (its own event loop), for clients
that are synchronous (schemathesis, hypothesis state machines)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn

from rms.config import Settings
from rms.devstack.embedded import free_port
from tests.conftest import ADMIN_TOKEN

ROOT = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def served(settings: Settings) -> Iterator[str]:
    """Serve ``create_app(settings)`` until the block ends; yields the base URL."""
    from message_service.app import create_app

    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                            log_level="warning", lifespan="on", access_log=False, ws="none",
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "the API server stopped while starting"
        assert time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def create_app_keys(base_url: str, admin_token: str, name: str, **fields: object
                    ) -> dict[str, str]:
    """Register an app over HTTP; returns the create response (api_key, signing_secret)."""
    body = {"name": name, "produce_topics": ["*"], "consume_topics": ["*"],
            "check_url_prefixes": ["http://127.0.0.1:1/"]} | fields
    response = httpx.post(f"{base_url}/v1/admin/apps", json=body,
                          headers={"Authorization": f"Bearer {admin_token}"})
    assert response.status_code == 201, response.text
    data: dict[str, str] = response.json()
    return data


@contextlib.contextmanager
def rms_serve(settings: Settings, log_path: Path, env: dict[str, str]) -> Iterator[int]:
    """A real ``rms serve`` process over the settings' PostgreSQL and Kafka (without the ack
    consumer) with the extra ``RMS_*`` environment ``env``, until the block ends; yields its
    port once ``/healthz`` answers."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")} | {
        "RMS_DATABASE_URL": settings.database_url,
        "RMS_KAFKA_BOOTSTRAP_SERVERS": settings.kafka_bootstrap_servers,
        "RMS_ADMIN_TOKEN": ADMIN_TOKEN, "RMS_ACK_CONSUMER_ENABLED": "false",
        "RMS_ALLOW_PRIVATE_CALLBACKS": "true"}
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "rms.cli", "serve", "--port", str(port)],
                                   env=base | env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        process.wait(15)
