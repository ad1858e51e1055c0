"""Fixtures of the confirm-service tests: a scripted callback server, a producer app allowed to
use it, and settings with short timeouts so failure paths run in seconds."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rms.config import Settings
from tests.integration.checkback.servers import CallbackServer, callback_server
from tests.support import Api, AppKeys


@pytest.fixture
async def server() -> AsyncIterator[CallbackServer]:
    async with callback_server() as running:
        yield running


@pytest.fixture
async def producer(api: Api, server: CallbackServer, unique: str) -> AppKeys:
    return await api.create_app(f"producer-{unique}", prefixes=[server.url])


@pytest.fixture
def worker_settings(settings: Settings) -> Settings:
    """Short call timeout and lease, small backoff cap: every path finishes within seconds."""
    return settings.model_copy(update={
        "callback_timeout_seconds": 1.0,
        "worker_lease_seconds": 30.0,
        "check_backoff_cap_seconds": 0.5,
        "worker_concurrency": 16,
    })


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The shared settings without the API's ack-topic consumer: these tests never ack over
    Kafka, and stopping that consumer costs seconds per test."""
    return settings.model_copy(update={"ack_consumer_enabled": False})
