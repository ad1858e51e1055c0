"""The check-back worker's runtime: one worker built from Settings, with its stores, the
dispatcher and the check-back HTTP client passed in. Used by the command and by tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import structlog

from confirm_service.caller import CallerSettings, CheckBackCaller
from rms.config import WorkerSettings
from rms.store.checkback import CheckBackStore
from rms.store.transactions import TransactionStore
from rms.usecases.checkback import (
    CheckBackWorker,
    CheckSettings,
    MessageCheckBacks,
    TransactionCheckBacks,
)
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
async def checkback_worker(settings: WorkerSettings) -> AsyncIterator[CheckBackWorker]:
    """A ready worker; everything it opened is closed on exit."""
    warn_if_lease_too_short(settings)
    async with worker_context(settings, KIND, confirms=True) as context:
        caller = CheckBackCaller(caller_settings(settings))
        try:
            store = CheckBackStore(context.engine)
            actor = context.worker_id
            subjects = (
                MessageCheckBacks(store, caller, context.dispatcher, actor),
                TransactionCheckBacks(TransactionStore(context.engine), caller,
                                      context.dispatcher, actor),
            )
            yield CheckBackWorker(CheckSettings.from_settings(settings), subjects, store.apps,
                                  store.oldest_due_lag, actor)
        finally:
            await caller.aclose()
