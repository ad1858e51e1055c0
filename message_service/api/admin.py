"""Operator endpoints (admin token): apps, message search, resolution by hand, stats."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query

from message_service.api.convert import app_out, credentials_out, events_out, message_out
from message_service.api.messages import ERRORS, IdPath
from message_service.deps import AdminActor, EventsPage, ServicesDep
from message_service.schemas import (
    AppCreate,
    AppCredentialsOut,
    AppDeletedOut,
    AppOut,
    AppsOut,
    BlockedKeyStats,
    BlockedPublishStats,
    ConsumerStats,
    ConsumeTopicsRequest,
    DeliveryRequest,
    EventsOut,
    GroupStats,
    MessageId,
    MessageOut,
    MessagePage,
    OrderedTopicsRequest,
    RotateRequest,
    RotateSigningSecretRequest,
    SigningSecretOut,
    StatsOut,
)
from message_service.strict_json import StrictJsonRoute
from rms.domain.apps import AppSpec, DeliverySettings
from rms.domain.listings import MessageFilter
from rms.domain.states import State

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/admin", tags=["admin"])


@router.post("/apps", status_code=201, response_model=AppCredentialsOut, responses=ERRORS)
async def create_app(body: AppCreate, _: AdminActor, wired: ServicesDep) -> AppCredentialsOut:
    """Register a producer/consumer app; its API key and signing secret are shown once."""
    spec = AppSpec(body.name, tuple(body.produce_topics), tuple(body.consume_topics),
                   tuple(body.check_url_prefixes), body.default_check_url,
                   tuple(body.ordered_topics),
                   DeliverySettings(body.max_deliveries, body.ack_timeout_seconds))
    created = await wired.operators.create_app(spec)
    wired.authentication.forget()
    return credentials_out(created)


@router.get("/apps", response_model=AppsOut, responses=ERRORS)
async def list_apps(_: AdminActor, wired: ServicesDep) -> AppsOut:
    """All registered apps (no secrets)."""
    return AppsOut(apps=[app_out(app) for app in await wired.operators.list_apps()])


@router.get("/apps/{name}", response_model=AppOut, responses=ERRORS)
async def get_app(name: str, _: AdminActor, wired: ServicesDep) -> AppOut:
    """One app (no secrets)."""
    return app_out(await wired.operators.app(name))


@router.post("/apps/{name}/rotate-key", response_model=AppCredentialsOut, responses=ERRORS)
async def rotate_key(name: str, _: AdminActor, wired: ServicesDep,
                     body: RotateRequest | None = None) -> AppCredentialsOut:
    """New API key (the old one stops working); optionally a new signing secret too."""
    rotate_secret = body.rotate_signing_secret if body else False
    credentials = await wired.operators.rotate_key(name, rotate_signing_secret=rotate_secret)
    wired.authentication.forget()
    return credentials_out(credentials)


@router.post("/apps/{name}/rotate-signing-secret", response_model=SigningSecretOut,
             responses=ERRORS)
async def rotate_signing_secret(name: str, _: AdminActor, wired: ServicesDep,
                                body: RotateSigningSecretRequest | None = None
                                ) -> SigningSecretOut:
    """New signing secret (shown once); the API key is unchanged. For the overlap
    (``overlap_seconds``, default RMS_SIGNING_SECRET_OVERLAP_SECONDS) check-backs carry both
    the new and the previous signature in ``webhook-signature``; a second rotation retires
    the older secret at once."""
    app = await wired.operators.rotate_signing_secret(name, body.overlap_seconds if body else None)
    wired.authentication.forget()
    return SigningSecretOut(**app_out(app).model_dump(), signing_secret=app.signing_secret)


@router.put("/apps/{name}/ordered-topics", response_model=AppOut, responses=ERRORS)
async def set_ordered_topics(name: str, body: OrderedTopicsRequest, _: AdminActor,
                             wired: ServicesDep) -> AppOut:
    """Replace the app's ordered topics: keyed messages on them are published in confirm
    order per key. Applies to messages prepared from now on."""
    app = await wired.operators.set_ordered_topics(name, tuple(body.ordered_topics))
    wired.authentication.forget()
    return app_out(app)


@router.put("/apps/{name}/delivery", response_model=AppOut, responses=ERRORS)
async def set_delivery(name: str, body: DeliveryRequest, _: AdminActor,
                       wired: ServicesDep) -> AppOut:
    """Replace the app's own delivery settings as a consumer (null: the message's). Messages
    confirmed from now on follow them."""
    app = await wired.operators.set_delivery(
        name, DeliverySettings(body.max_deliveries, body.ack_timeout_seconds))
    wired.authentication.forget()
    return app_out(app)


@router.put("/apps/{name}/consume-topics", response_model=AppOut, responses=ERRORS)
async def set_consume_topics(name: str, body: ConsumeTopicsRequest, _: AdminActor,
                             wired: ServicesDep) -> AppOut:
    """Replace the app's consume topics; it is released from the sent messages it owes whose
    topic they no longer match."""
    app = await wired.operators.set_consume_topics(name, tuple(body.consume_topics))
    wired.authentication.forget()
    return app_out(app)


@router.delete("/apps/{name}", response_model=AppDeletedOut, responses=ERRORS)
async def delete_app(name: str, _: AdminActor, wired: ServicesDep) -> AppDeletedOut:
    """Delete an app, releasing it from every sent message it owes; 409 while messages or
    transactions of its own are stored."""
    released = await wired.operators.delete_app(name)
    wired.authentication.forget()
    return AppDeletedOut(name=name, released=released)


@router.get("/messages", response_model=MessagePage, responses=ERRORS)
async def list_messages(
    _: AdminActor,
    wired: ServicesDep,
    state: State | None = None,
    dead: bool | None = None,
    topic: str | None = None,
    app: str | None = None,
    consumer: Annotated[str | None, Query(
        description="only the messages this consumer app still owes (with state=sent&dead=true: "
        "its dead letters)")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> MessagePage:
    """Messages matching the filters, oldest first, a page at a time."""
    found, next_cursor = await wired.operators.search(
        MessageFilter(state, dead, topic, app, consumer), limit, cursor)
    return MessagePage(items=[message_out(m) for m in found], next_cursor=next_cursor)


@router.get("/messages/{message_id}", response_model=MessageOut, responses=ERRORS)
async def get_message(_: AdminActor, wired: ServicesDep,
                      message_id: MessageId = IdPath) -> MessageOut:
    """Any app's message."""
    return message_out(await wired.service.message(message_id))


@router.get("/messages/{message_id}/events", response_model=EventsOut, responses=ERRORS)
async def message_events(_: AdminActor, wired: ServicesDep, page: EventsPage,
                         message_id: MessageId = IdPath) -> EventsOut:
    """Any app's message history, a page at a time."""
    return events_out(await wired.service.events(message_id, limit=page.limit,
                                                 cursor=page.cursor))


@router.post("/messages/{message_id}/confirm", response_model=MessageOut, responses=ERRORS)
async def admin_confirm(actor: AdminActor, wired: ServicesDep,
                        message_id: MessageId = IdPath) -> MessageOut:
    """Resolve a pending-send by hand as committed (clears dead) and publish it."""
    return message_out(await wired.service.admin_confirm(message_id, actor=actor))


@router.post("/messages/{message_id}/cancel", response_model=MessageOut, responses=ERRORS)
async def admin_cancel(actor: AdminActor, wired: ServicesDep,
                       message_id: MessageId = IdPath) -> MessageOut:
    """Resolve a pending-send by hand as rolled back (clears dead)."""
    return message_out(await wired.service.admin_cancel(message_id, actor=actor))


@router.post("/messages/{message_id}/resend", response_model=MessageOut, responses=ERRORS)
async def admin_resend(actor: AdminActor, wired: ServicesDep,
                       message_id: MessageId = IdPath) -> MessageOut:
    """Publish a sent message again now; clears dead and restarts its delivery budget."""
    return message_out(await wired.resends.resend(message_id, actor=actor))


@router.get("/stats", response_model=StatsOut, responses=ERRORS)
async def stats(_: AdminActor, wired: ServicesDep) -> StatsOut:
    """Counts by state and dead per app and topic; ages of the oldest pending and unacked."""
    found = await wired.operators.stats()
    return StatsOut(
        totals=found.totals,
        oldest_pending_send_age_seconds=found.oldest_pending_send_age_seconds,
        oldest_unacked_age_seconds=found.oldest_unacked_age_seconds,
        groups=[GroupStats(app=g.app, topic=g.topic, counts=g.counts,
                           oldest_pending_send_age_seconds=g.oldest_pending_send_age_seconds,
                           oldest_unacked_age_seconds=g.oldest_unacked_age_seconds)
                for g in found.groups],
        publish_blocked=[BlockedPublishStats(**vars(b)) for b in found.publish_blocked],
        blocked_keys=[BlockedKeyStats(**vars(k)) for k in found.blocked_keys],
        consumers=[ConsumerStats(**asdict(c)) for c in found.consumers],
    )
