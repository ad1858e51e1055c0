"""Wiring of one confirm worker from Settings: the shared worker context (engine, Kafka
publisher, dispatcher) plus the check-back HTTP client. Used by the command and by tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import structlog

from confirm_service.caller import CallerSettings, CheckCaller
from rms.config import WorkerSettings
from rms.store.checks import CheckStore
from rms.store.transactions import TransactionStore
from rms.usecases.checkbacks import CheckSettings, ConfirmWorker
from rms.usecases.transactions import TransactionChecks
from rms.worker import worker_context

log = structlog.get_logger(__name__)
KIND = "confirm-worker"


def caller_settings(settings: WorkerSettings) -> CallerSettings:
    return CallerSettings(
        timeout_seconds=settings.callback_timeout_seconds,
        max_response_bytes=settings.callback_max_response_bytes,
        concurrency=settings.worker_concurrency,
        allow_private=settings.allow_private_callbacks,
    )


def warn_if_lease_too_short(settings: WorkerSettings) -> None:
    """A lease shorter than a batch can take lets another worker re-claim messages still being
    checked (a second call in the same round). Not fatal: the guarded writes keep the data
    right, but the operator should know."""
    rounds = -(-settings.worker_batch_size // settings.worker_concurrency)
    worst = rounds * settings.callback_timeout_seconds
    if settings.worker_lease_seconds <= worst:
        log.warning("confirm.lease_too_short", lease_seconds=settings.worker_lease_seconds,
                    worst_batch_seconds=worst,
                    hint="raise RMS_WORKER_LEASE_SECONDS or RMS_WORKER_CONCURRENCY, or lower "
                         "RMS_WORKER_BATCH_SIZE or RMS_CALLBACK_TIMEOUT_SECONDS")


@contextlib.asynccontextmanager
async def confirm_worker(settings: WorkerSettings) -> AsyncIterator[ConfirmWorker]:
    """A ready worker; everything it opened is closed on exit."""
    warn_if_lease_too_short(settings)
    async with worker_context(settings, KIND) as context:
        caller = CheckCaller(caller_settings(settings))
        try:
            checks = CheckSettings.from_settings(settings)
            store = CheckStore(context.engine)
            transactions = TransactionChecks(checks, TransactionStore(context.engine),
                                             store.apps, caller, context.dispatcher,
                                             context.worker_id)
            yield ConfirmWorker(checks, store, caller, context.dispatcher, context.worker_id,
                                transactions=transactions)
        finally:
            await caller.aclose()
