"""The shared skeleton of the check-back (confirm) and redelivery workers: build the engine,
publisher and dispatcher from the worker settings (:func:`worker_context`), run ``tick`` on
APScheduler every ``RMS_WORKER_INTERVAL_SECONDS`` (never two ticks of one worker at once), stop
cleanly on SIGINT/SIGTERM (:func:`run_forever`). Start-up is :mod:`rms.startup`.

A tick is a plain async function tests call directly; the scheduler only calls it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from sqlalchemy.ext.asyncio import AsyncEngine

from rms.config import WorkerSettings
from rms.dispatcher import Dispatcher, dispatcher_for
from rms.heap import settle_heap
from rms.kafka.publisher import KafkaPublisher
from rms.kafka.transactional import atomic_publisher
from rms.outage import OutageLog
from rms.store.apps import AppStore
from rms.store.database import create_engine
from rms.usecases.apps_repair import keep_consume_regexes

log = structlog.get_logger(__name__)


def worker_id(kind: str) -> str:
    """Unique per process, readable in events and logs: ``confirm-worker:host:pid:abcd``."""
    return f"{kind}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:4]}"


@dataclass
class WorkerContext:
    settings: WorkerSettings
    engine: AsyncEngine
    publisher: KafkaPublisher
    dispatcher: Dispatcher
    worker_id: str


@contextlib.asynccontextmanager
async def worker_context(settings: WorkerSettings, kind: str, *, confirms: bool = False
                         ) -> AsyncIterator[WorkerContext]:
    """Engine + publisher + dispatcher for one worker process, closed on exit; while it lives
    the apps an earlier release wrote are repaired (:mod:`rms.usecases.apps_repair`).
    ``confirms``: the worker confirms transactions, so it publishes their members with
    transactional producers of its own (:mod:`rms.kafka.transactional`)."""
    engine = create_engine(settings, pool_size=min(settings.db_pool_size, 10))
    publisher = KafkaPublisher(settings)
    await publisher.start(wait_seconds=5.0)
    repairs = asyncio.create_task(keep_consume_regexes(AppStore(engine), settings.apps_repair_seconds))
    try:
        async with contextlib.AsyncExitStack() as stack:
            atomic = (await stack.enter_async_context(atomic_publisher(settings, kind))
                      if confirms else None)
            dispatcher = dispatcher_for(publisher, engine, settings, atomic)
            yield WorkerContext(settings, engine, publisher, dispatcher, worker_id(kind))
    finally:
        repairs.cancel()
        await publisher.stop()
        await engine.dispose()


Tick = Callable[[], Awaitable[object]]


async def run_forever(tick: Tick, interval_seconds: float, name: str) -> None:
    """Run ``tick`` every ``interval_seconds`` until SIGINT/SIGTERM. A failing tick is logged
    once per outage (:class:`~rms.outage.OutageLog`) and the next one runs as scheduled (a
    database blip must not kill the worker)."""
    outage = OutageLog(name)

    async def guarded() -> None:
        try:
            await tick()
        except asyncio.CancelledError:
            # the process is stopping and the scheduler cut the round short: what it claimed
            # is under a lease that another round takes over (no traceback for a stop)
            log.info("worker.round_interrupted", worker=name)
        except Exception as exc:
            outage.failed(exc)
        else:
            outage.succeeded()

    scheduler = AsyncIOScheduler()
    scheduler.add_job(guarded, "interval", seconds=interval_seconds, max_instances=1,
                      coalesce=True, id=name, next_run_time=_now())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    settle_heap()
    scheduler.start()
    log.info("worker.started", worker=name, interval_seconds=interval_seconds)
    try:
        await stop.wait()
    finally:
        scheduler.shutdown(wait=False)
        log.info("worker.stopped", worker=name)


def _now() -> datetime:
    return datetime.now(UTC)
