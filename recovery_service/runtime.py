"""Wiring of one redelivery worker from Settings: the shared worker context (engine, Kafka
publisher, dispatcher) plus the worker's stores and its ordering sequencer, built here once and
passed in to :class:`rms.usecases.redelivery.RedeliveryWorker`. Used by the command and by
tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.config import WorkerSettings
from rms.dispatcher import Dispatcher
from rms.kafka.publisher import Publisher
from rms.store.admin import AdminStore
from rms.store.ordering import OrderingStore
from rms.store.redelivery import RedeliveryStore
from rms.usecases.redelivery import RedeliveryWorker
from rms.usecases.sequencer import Sequencer
from rms.worker import WorkerContext, worker_context

log = structlog.get_logger(__name__)
KIND = "recovery-worker"


def warn_if_lease_too_short(settings: WorkerSettings) -> None:
    """A claim whose lease may run out while its publish is still in flight lets another worker
    publish the message again. Not fatal (the guarded writes keep the data right), but the
    operator should know."""
    if settings.worker_lease_seconds <= 2 * settings.kafka_publish_timeout_seconds:
        log.warning("recovery.short_lease", lease_seconds=settings.worker_lease_seconds,
                    publish_timeout_seconds=settings.kafka_publish_timeout_seconds,
                    hint="a claim may expire while its publish is still in flight; set "
                         "RMS_WORKER_LEASE_SECONDS well above RMS_KAFKA_PUBLISH_TIMEOUT_SECONDS")


def build(settings: WorkerSettings, engine: AsyncEngine, publisher: Publisher,
          dispatcher: Dispatcher, worker_id: str) -> RedeliveryWorker:
    """A redelivery worker publishing through ``dispatcher`` (whose publisher is
    ``publisher``)."""
    warn_if_lease_too_short(settings)
    sequencer = Sequencer(settings, OrderingStore(engine), dispatcher, worker_id)
    return RedeliveryWorker(settings, RedeliveryStore(engine), AdminStore(engine), publisher,
                            dispatcher, sequencer, worker_id)


def from_context(context: WorkerContext) -> RedeliveryWorker:
    """The redelivery worker of a worker process (:func:`rms.worker.worker_context`)."""
    return build(context.settings, context.engine, context.publisher, context.dispatcher,
                 context.worker_id)


@contextlib.asynccontextmanager
async def redelivery_worker(settings: WorkerSettings) -> AsyncIterator[RedeliveryWorker]:
    """A ready worker; everything it opened is closed on exit."""
    async with worker_context(settings, KIND) as context:
        yield from_context(context)
