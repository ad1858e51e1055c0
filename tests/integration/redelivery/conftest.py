"""Fixtures of the recovery-service tests: an API without the ack-topic consumer (acks go over
HTTP here, and it keeps teardown fast) and an in-process recovery worker whose tick tests call
directly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from recovery_service.runtime import from_context
from rms.config import Settings
from rms.usecases.redelivery import RedeliveryWorker
from rms.worker import WorkerContext, worker_context
from tests.integration.redelivery.helpers import SqlHelper


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"ack_consumer_enabled": False,
                                       "publish_retry_seconds": 0.2,
                                       "worker_lease_seconds": 10.0})


@pytest.fixture
async def context(settings: Settings) -> AsyncIterator[WorkerContext]:
    async with worker_context(settings, "recovery-worker") as built:
        yield built


@pytest.fixture
def worker(context: WorkerContext) -> RedeliveryWorker:
    return from_context(context)


@pytest.fixture
def engine(context: WorkerContext) -> AsyncEngine:
    return context.engine


@pytest.fixture
def sql(engine: AsyncEngine) -> SqlHelper:
    return SqlHelper(engine)
