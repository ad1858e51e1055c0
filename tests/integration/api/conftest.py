"""Fixtures of the HTTP API contract tests: an API with small limits."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.support import Api

SMALL_PAYLOAD_BYTES = 1024
SMALL_BATCH_ITEMS = 5


@pytest.fixture
async def small_api(settings: Settings) -> AsyncIterator[Api]:
    """Like ``api`` but with RMS_MAX_PAYLOAD_BYTES=1024 and at most 5 batch items."""
    from message_service.app import create_app

    small = settings.model_copy(update={"max_payload_bytes": SMALL_PAYLOAD_BYTES,
                                        "max_batch_items": SMALL_BATCH_ITEMS})
    app = create_app(small)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rms.test") as client:
            yield Api(client, ADMIN_TOKEN, small)
