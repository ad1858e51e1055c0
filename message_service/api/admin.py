"""Operator endpoints (admin token): apps, message search, resolution by hand, stats."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from message_service.api.convert import app_out, credentials_out, event_out, message_out
from message_service.api.messages import ERRORS, IdPath
from message_service.deps import AdminActor, ServicesDep
from message_service.schemas import (
    AppCreate,
    AppCredentialsOut,
    AppOut,
    AppsOut,
    BlockedPublishStats,
    EventsOut,
    GroupStats,
    MessageId,
    MessageOut,
    MessagePage,
    RotateRequest,
    RotateSigningSecretRequest,
    SigningSecretOut,
    StatsOut,
)
from message_service.strict_json import StrictJsonRoute
from rms.callback_urls import validate_prefix
from rms.domain.states import State
from rms.store.admin import MessageFilter
from rms.store.apps import AppSpec

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/admin", tags=["admin"])


@router.post("/apps", status_code=201, response_model=AppCredentialsOut, responses=ERRORS)
async def create_app(body: AppCreate, _: AdminActor, wired: ServicesDep) -> AppCredentialsOut:
    """Register a producer/consumer app; its API key and signing secret are shown once."""
    prefixes = tuple(validate_prefix(prefix) for prefix in body.check_url_prefixes)
    default = None if body.default_check_url is None else validate_prefix(body.default_check_url)
    spec = AppSpec(body.name, tuple(body.produce_topics), tuple(body.consume_topics),
                   prefixes, default)
    return credentials_out(await wired.apps.create(spec))


@router.get("/apps", response_model=AppsOut, responses=ERRORS)
async def list_apps(_: AdminActor, wired: ServicesDep) -> AppsOut:
    """All registered apps (no secrets)."""
    return AppsOut(apps=[app_out(app) for app in await wired.apps.list()])


@router.get("/apps/{name}", response_model=AppOut, responses=ERRORS)
async def get_app(name: str, _: AdminActor, wired: ServicesDep) -> AppOut:
    """One app (no secrets)."""
    return app_out(await wired.apps.get(name))


@router.post("/apps/{name}/rotate-key", response_model=AppCredentialsOut, responses=ERRORS)
async def rotate_key(name: str, _: AdminActor, wired: ServicesDep,
                     body: RotateRequest | None = None) -> AppCredentialsOut:
    """New API key (the old one stops working); optionally a new signing secret too."""
    rotate_secret = body.rotate_signing_secret if body else False
    credentials = await wired.apps.rotate_key(
        name, rotate_signing_secret=rotate_secret,
        overlap_seconds=wired.settings.signing_secret_overlap_seconds)
    wired.auth_cache.clear()
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
    overlap = (body.overlap_seconds if body and body.overlap_seconds is not None
               else wired.settings.signing_secret_overlap_seconds)
    app = await wired.apps.rotate_signing_secret(name, overlap)
    wired.auth_cache.clear()
    return SigningSecretOut(**app_out(app).model_dump(), signing_secret=app.signing_secret)


@router.get("/messages", response_model=MessagePage, responses=ERRORS)
async def list_messages(
    _: AdminActor,
    wired: ServicesDep,
    state: State | None = None,
    dead: bool | None = None,
    topic: str | None = None,
    app: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> MessagePage:
    """Messages matching the filters, oldest first, a page at a time."""
    found, next_cursor = await wired.admin.search(MessageFilter(state, dead, topic, app), limit,
                                                cursor)
    return MessagePage(items=[message_out(m) for m in found], next_cursor=next_cursor)


@router.get("/messages/{message_id}", response_model=MessageOut, responses=ERRORS)
async def get_message(_: AdminActor, wired: ServicesDep,
                      message_id: MessageId = IdPath) -> MessageOut:
    """Any app's message."""
    return message_out(await wired.messages.get(message_id))


@router.get("/messages/{message_id}/events", response_model=EventsOut, responses=ERRORS)
async def message_events(_: AdminActor, wired: ServicesDep,
                         message_id: MessageId = IdPath) -> EventsOut:
    """Any app's message history."""
    await wired.messages.get(message_id)
    return EventsOut(events=[event_out(e) for e in await wired.messages.events(message_id)])


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
    return message_out(await wired.service.admin_resend(message_id, actor=actor))


@router.get("/stats", response_model=StatsOut, responses=ERRORS)
async def stats(_: AdminActor, wired: ServicesDep) -> StatsOut:
    """Counts by state and dead per app and topic; ages of the oldest pending and unacked."""
    groups = await wired.admin.stats()
    totals: dict[str, int] = {s.value: 0 for s in State} | {"dead": 0}
    for group in groups:
        for name, count in group.counts.items():
            totals[name] = totals.get(name, 0) + count
    ages = [(g.oldest_pending_send_age_seconds, g.oldest_unacked_age_seconds) for g in groups]
    blocked = await wired.admin.blocked_publishes()
    return StatsOut(
        totals=totals,
        oldest_pending_send_age_seconds=_oldest(a[0] for a in ages),
        oldest_unacked_age_seconds=_oldest(a[1] for a in ages),
        groups=[GroupStats(app=g.app, topic=g.topic, counts=g.counts,
                           oldest_pending_send_age_seconds=g.oldest_pending_send_age_seconds,
                           oldest_unacked_age_seconds=g.oldest_unacked_age_seconds)
                for g in groups],
        publish_blocked=[BlockedPublishStats(**vars(b)) for b in blocked],
    )


def _oldest(values: object) -> float | None:
    present = [v for v in values if v is not None]  # type: ignore[attr-defined]
    return max(present) if present else None
