"""The FastAPI application: wiring of store, publisher, ack consumer and routes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from message_service import api_docs, openapi_doc, problems
from message_service.admission import (
    Admission,
    AdmissionMiddleware,
    AuthenticatedCallers,
    LimitPolicy,
)
from message_service.api import admin, apps, dead_letters, health, messages, transactions
from message_service.body_limit import BodyLimitMiddleware
from message_service.dashboard import router as dashboard
from message_service.deps import Services
from message_service.hot_paths import HotPaths
from message_service.limits import Limits
from rms import __version__
from rms.config import Settings
from rms.dispatcher import dispatcher_for
from rms.heap import settle_heap
from rms.kafka.ack_consumer import AckConsumer
from rms.kafka.publisher import KafkaPublisher
from rms.kafka.transactional import TransactionalPublisher, atomic_publisher
from rms.store.admin import AdminStore
from rms.store.apps import AppStore
from rms.store.database import connect_failure, create_engine
from rms.store.messages import MessageStore
from rms.store.redelivery import RedeliveryStore
from rms.store.subscriptions.store import SubscriptionStore
from rms.store.transactions import TransactionStore
from rms.usecases.acks import Acks
from rms.usecases.apps_repair import keep_consume_regexes
from rms.usecases.authentication import Authentication
from rms.usecases.health import Health
from rms.usecases.messages import MessageService
from rms.usecases.operators import Operators
from rms.usecases.resends import Resends
from rms.usecases.transactions import Transactions

log = structlog.get_logger(__name__)
AUTH_CACHE_SECONDS = 2.0
DATABASE_PROBE_SECONDS = 5.0
REQUEST_OVERHEAD_BYTES = 64 * 1024
API_ROLE = "api"  # the role in the transactional ids of rms serve's producers
HAND_OFF_GRACE_SECONDS = 5.0  # at shutdown, beyond a publish's time-out: recording its answer


async def _report_unreachable_database(engine: AsyncEngine, url: str) -> None:
    """One warning at start naming where PostgreSQL was expected, if it cannot be reached
    (the API still starts; /readyz tells when it can)."""
    try:
        async with asyncio.timeout(DATABASE_PROBE_SECONDS), engine.connect():
            return
    except Exception as exc:
        log.warning("database.unreachable", problem=connect_failure(url, exc))


def _services(settings: Settings, engine: AsyncEngine, publisher: KafkaPublisher,
              atomic: TransactionalPublisher | None) -> Services:
    """The use cases over one engine and one publisher (and the transactional producers that
    publish a transaction's members together)."""
    store, apps, admin = MessageStore(engine), AppStore(engine), AdminStore(engine)
    subscriptions = SubscriptionStore(engine)
    dispatcher = dispatcher_for(publisher, engine, settings, atomic)
    service = MessageService(settings, store, dispatcher)
    return Services(
        settings=settings,
        service=service,
        acks=Acks(settings, store, apps, subscriptions),
        operators=Operators(settings, apps, admin, subscriptions),
        resends=Resends(dispatcher, store, admin, RedeliveryStore(engine)),
        health=Health(admin, publisher, subscriptions),
        authentication=Authentication(apps, AUTH_CACHE_SECONDS),
        transactions=Transactions(service.drafts, TransactionStore(engine), dispatcher),
    )


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(settings)
        publisher = KafkaPublisher(settings)
        await publisher.start(wait_seconds=5.0)
        producers = contextlib.AsyncExitStack()
        atomic = await producers.enter_async_context(atomic_publisher(settings, API_ROLE))
        app.state.engine = engine
        app.state.publisher = publisher
        app.state.services = wired = _services(settings, engine, publisher, atomic)
        if app.state.admission is not None:
            app.state.admission.callers = AuthenticatedCallers(wired.authentication)
        acks = AckConsumer(settings, wired.acks.apply_records, wired.health.admin.reachable)
        if settings.ack_consumer_enabled:
            acks.start()
        probe = asyncio.create_task(_report_unreachable_database(engine, settings.database_url))
        repairs = asyncio.create_task(keep_consume_regexes(wired.acks.apps, settings.apps_repair_seconds))
        settle_heap()
        try:
            yield
        finally:
            probe.cancel()
            repairs.cancel()
            await wired.service.dispatcher.drain(settings.kafka_publish_timeout_seconds
                                                 + HAND_OFF_GRACE_SECONDS)
            await acks.stop()
            await producers.aclose()
            await publisher.stop()
            await engine.dispose()

    app = FastAPI(
        title="RMS - reliable message service",
        version=__version__,  # the release: rms --version, the image labels, the clients
        summary="prepare / confirm / cancel / ack messages, published to Kafka reliably",
        lifespan=lifespan,
        docs_url=None,  # served from the package (api_docs), not from a CDN
    )
    app.state.limits = Limits(settings)
    problems.install(app)
    openapi_doc.install(app)
    api_docs.install(app)
    app.add_middleware(HotPaths)  # the innermost: inside the body limit and admission
    app.add_middleware(
        BodyLimitMiddleware,
        single_limit=settings.max_payload_bytes + REQUEST_OVERHEAD_BYTES,
        batch_limit=settings.max_batch_bytes,
    )
    app.state.admission = None
    if settings.admission_enabled:  # added last: the outermost, so a refusal costs least
        app.state.admission = gate = Admission(_limit_policy(settings))
        app.add_middleware(AdmissionMiddleware, gate=gate)
    app.include_router(messages.router)
    app.include_router(apps.router)
    app.include_router(transactions.router)
    app.include_router(admin.router)
    app.include_router(transactions.admin_router)
    app.include_router(dead_letters.router)
    app.include_router(health.router)
    app.include_router(dashboard.router)
    return app


def _limit_policy(settings: Settings) -> LimitPolicy:
    return LimitPolicy(limit=settings.admission_limit,
                       maximum=settings.admission_max_limit,
                       target_seconds=settings.admission_queue_target_seconds,
                       interval_seconds=settings.admission_queue_interval_seconds,
                       longest_wait_seconds=settings.admission_queue_longest_wait_seconds,
                       unauthenticated=settings.admission_unauthenticated_limit)
