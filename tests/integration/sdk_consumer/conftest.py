"""Fixtures of the consumer-SDK tests: the consumer's own database (separate from RMS's) with a
``points`` table, as the demo points service has."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rms.config import Settings
from rms.devstack.embedded import EmbeddedPostgres
from rms_client.consumer import ensure_inbox
from tests.conftest import ADMIN_TOKEN
from tests.support import Api


@pytest.fixture
async def consumer_db(postgres: EmbeddedPostgres) -> AsyncIterator[AsyncEngine]:
    name = f"c_{uuid.uuid4().hex[:16]}"
    postgres.create_database(name)
    engine = create_async_engine(postgres.url(name))
    await ensure_inbox(engine)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE effects (message_id text, delivery int, "
                                "at timestamptz DEFAULT now())"))
    yield engine
    await engine.dispose()
    postgres.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """HTTP acks unless a test asks for ``acks_api`` (the ack-topic consumer slows teardown)."""
    return settings.model_copy(update={"ack_consumer_enabled": False})


@pytest.fixture
async def acks_api(settings: Settings) -> AsyncIterator[Api]:
    """The API with its ack-topic consumer running."""
    from message_service.app import create_app

    with_acks = settings.model_copy(update={"ack_consumer_enabled": True})
    app = create_app(with_acks)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, ADMIN_TOKEN, with_acks)
