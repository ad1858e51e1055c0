"""The API served by a real uvicorn in a background thread (its own event loop), for clients
that are synchronous (schemathesis, hypothesis state machines)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import httpx
import uvicorn

from rms.config import Settings
from rms.devstack.embedded import free_port


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
