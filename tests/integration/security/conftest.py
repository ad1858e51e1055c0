"""Fixtures of the security tests: an API built with settings of the test's choosing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from rms.config import Settings
from tests.conftest import ADMIN_TOKEN
from tests.support import Api

ApiFactory = Callable[..., contextlib.AbstractAsyncContextManager[tuple[Api, FastAPI]]]


@pytest.fixture
def api_with(settings: Settings) -> ApiFactory:
    """``async with api_with(max_pending_per_app=3) as (api, app):`` an in-process API (real
    PostgreSQL and broker) with those settings changed."""

    @contextlib.asynccontextmanager
    async def build(**changes: Any) -> AsyncIterator[tuple[Api, FastAPI]]:
        from message_service.app import create_app

        changed = settings.model_copy(update={"ack_consumer_enabled": False} | changes)
        app = create_app(changed)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport,
                                         base_url="http://rms.test") as client:
                yield Api(client, ADMIN_TOKEN, changed), app

    return build
