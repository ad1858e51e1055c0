"""Fixtures of the producer-SDK tests: the RMS API in process (its ASGI transport exposed, so
tests can wrap it with faults) and the shared settings without the ack-topic consumer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.support import Api


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """No ack-topic consumer: these tests never ack over Kafka, and stopping it costs seconds."""
    return settings.model_copy(update={"ack_consumer_enabled": False})


@pytest.fixture
async def rms_app(settings: Settings) -> AsyncIterator[FastAPI]:
    """The RMS API application, started."""
    from message_service.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
def rms_transport(rms_app: FastAPI) -> httpx.AsyncBaseTransport:
    """The RMS API as an in-process transport (base URL http://rms.test)."""
    return httpx.ASGITransport(app=rms_app)


@pytest.fixture
async def api(rms_transport: httpx.AsyncBaseTransport, settings: Settings) -> AsyncIterator[Api]:
    """Like the shared ``api`` fixture, over the same app as ``rms_transport``."""
    async with httpx.AsyncClient(transport=rms_transport, base_url="http://rms.test") as client:
        yield Api(client, ADMIN_TOKEN, settings)
