"""The FastAPI application: wiring of store, publisher, ack consumer and routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from message_service import openapi_doc, problems
from message_service.api import admin, dead_letters, health, messages
from message_service.body_limit import BodyLimitMiddleware
from message_service.dashboard import router as dashboard
from message_service.deps import AuthCache, Services
from message_service.limits import Limits
from message_service.service import MessageService
from rms.config import Settings
from rms.delivery import Dispatcher
from rms.kafka.ack_consumer import AckConsumer
from rms.kafka.publisher import KafkaPublisher
from rms.store.admin import AdminStore
from rms.store.apps import AppStore
from rms.store.database import create_engine
from rms.store.deliveries import DeliveryStore
from rms.store.messages import MessageStore

AUTH_CACHE_SECONDS = 2.0
REQUEST_OVERHEAD_BYTES = 64 * 1024


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(settings)
        publisher = KafkaPublisher(settings)
        await publisher.start(wait_seconds=5.0)
        store = MessageStore(engine)
        dispatcher = Dispatcher(publisher, DeliveryStore(engine), settings.publish_retry_seconds,
                                settings.delivery_backoff_cap_seconds)
        apps = AppStore(engine)
        app.state.engine = engine
        app.state.publisher = publisher
        app.state.services = Services(
            settings=settings, apps=apps, messages=store, admin=AdminStore(engine),
            service=MessageService(settings, store, dispatcher),
            auth_cache=AuthCache(AUTH_CACHE_SECONDS),
        )
        acks = AckConsumer(settings, store, apps)
        if settings.ack_consumer_enabled:
            acks.start()
        try:
            yield
        finally:
            await acks.stop()
            await publisher.stop()
            await engine.dispose()

    app = FastAPI(
        title="RMS - reliable message service",
        version="1",
        summary="prepare / confirm / cancel / ack messages, published to Kafka reliably",
        lifespan=lifespan,
    )
    app.state.limits = Limits(settings)
    problems.install(app)
    openapi_doc.install(app)
    app.add_middleware(
        BodyLimitMiddleware,
        single_limit=settings.max_payload_bytes + REQUEST_OVERHEAD_BYTES,
        batch_limit=settings.max_batch_bytes,
    )
    app.include_router(messages.router)
    app.include_router(admin.router)
    app.include_router(dead_letters.router)
    app.include_router(health.router)
    app.include_router(dashboard.router)
    return app
