"""Producer and consumer endpoints: prepare, send, confirm, cancel, get, events, ack, batches."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from fastapi import APIRouter, Path, Request, Response

from message_service.api.convert import (
    ack_response,
    batch_response,
    events_out,
    message_response,
)
from message_service.deps import CurrentApp, EventsPage, RequestTrace, Services, ServicesDep
from message_service.limits import LIMIT_RESPONSES, RATE_LIMIT, PendingSlots, pending_places
from message_service.schemas import (
    BatchIdsRequest,
    BatchOut,
    BatchPrepareRequest,
    EventsOut,
    MessageId,
    MessageOut,
    PrepareRequest,
    Problem,
)
from message_service.strict_json import StrictJsonRoute
from rms.domain.models import App
from rms_client.ids import MESSAGE_ID_PATTERN
from rms_client.trace import TraceContext

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/messages", tags=["messages"],
                   dependencies=[RATE_LIMIT], responses=LIMIT_RESPONSES)
IdPath = Path(pattern=MESSAGE_ID_PATTERN, description="the message id")
ERRORS: dict[int | str, dict[str, object]] = {
    code: {"model": Problem, "description": text}
    for code, text in {401: "no or wrong API key", 403: "topic not permitted",
                       404: "unknown or not yours", 409: "conflict",
                       413: "too large", 422: "invalid input"}.items()
}

ACK_ANSWERS: dict[int | str, dict[str, object]] = ERRORS | {200: {
    "description": "the message as the consumer may see it (its own subscriber entry and ack "
                   "only, unless it is the producer); RMS-Ack says what the ack did",
    "headers": {"RMS-Ack": {"description": "recorded | repeated | already-done | "
                                           "not-a-subscriber | not-recorded",
                            "schema": {"type": "string"}}}}}


@router.post("", status_code=201, response_model=MessageOut, responses=ERRORS)
async def prepare(body: PrepareRequest, app: CurrentApp, wired: ServicesDep,
                  request: Request, trace: RequestTrace) -> Response:
    """Prepare a message: stored as pending-send, not delivered until confirmed."""
    return await prepare_one(pending_places(request, app.name, 1), wired, app, body, trace)


async def prepare_one(places: AbstractAsyncContextManager[PendingSlots], wired: Services,
                      app: App, body: PrepareRequest, trace: TraceContext | None) -> Response:
    """A prepare holding one of the app's pending-send ``places``: 201, or 200 for a repeat
    (also the answer of :mod:`message_service.hot_paths`)."""
    async with places as held:
        message, created = await wired.service.prepare(app, body, one_shot=False, trace=trace)
        held.created = int(created)
    return message_response(message, 201 if created else 200)


@router.post("/send", status_code=201, response_model=MessageOut, responses=ERRORS)
async def send(body: PrepareRequest, app: CurrentApp, wired: ServicesDep,
               trace: RequestTrace) -> Response:
    """One-shot prepare + confirm for a message outside any local transaction."""
    message, created = await wired.service.prepare(app, body, one_shot=True, trace=trace)
    return message_response(message, 201 if created else 200)


@router.post("/batch", status_code=201, response_model=BatchOut, responses=ERRORS)
async def prepare_batch(body: BatchPrepareRequest, app: CurrentApp, wired: ServicesDep,
                        request: Request, trace: RequestTrace) -> Response:
    """Prepare many messages in one request; all or nothing."""
    async with pending_places(request, app.name, len(body.messages)) as places:
        results = await wired.service.prepare_batch(app, body.messages, trace=trace)
        places.created = len(results)  # repeats included: counted until the next read
    return batch_response(results, 201)


@router.post("/batch/confirm", response_model=BatchOut, responses=ERRORS)
async def confirm_batch(body: BatchIdsRequest, app: CurrentApp, wired: ServicesDep) -> Response:
    """Confirm many messages in one request; all or nothing."""
    return batch_response(await wired.service.confirm_batch(app, body.message_ids))


@router.post("/batch/cancel", response_model=BatchOut, responses=ERRORS)
async def cancel_batch(body: BatchIdsRequest, app: CurrentApp, wired: ServicesDep) -> Response:
    """Cancel many messages in one request; all or nothing."""
    return batch_response(await wired.service.cancel_batch(app, body.message_ids))


@router.post("/{message_id}/confirm", response_model=MessageOut, responses=ERRORS)
async def confirm(app: CurrentApp, wired: ServicesDep,
                  message_id: MessageId = IdPath) -> Response:
    """Confirm: pending-send -> sent, then publish to Kafka (idempotent)."""
    return await confirm_one(wired, app, message_id)


async def confirm_one(wired: Services, app: App, message_id: str) -> Response:
    return message_response(await wired.service.confirm(app, message_id))


@router.post("/{message_id}/cancel", response_model=MessageOut, responses=ERRORS)
async def cancel(app: CurrentApp, wired: ServicesDep,
                 message_id: MessageId = IdPath) -> Response:
    """Cancel: pending-send -> deleted; never delivered (idempotent)."""
    return await cancel_one(wired, app, message_id)


async def cancel_one(wired: Services, app: App, message_id: str) -> Response:
    return message_response(await wired.service.cancel(app, message_id))


@router.post("/{message_id}/ack", response_model=MessageOut, responses=ACK_ANSWERS)
async def ack(app: CurrentApp, wired: ServicesDep, message_id: MessageId = IdPath) -> Response:
    """Acknowledge processing by a consumer: sent -> done (idempotent)."""
    message, outcome = await wired.acks.ack(app, message_id)
    return ack_response(message, outcome, app.name)


@router.get("/{message_id}", response_model=MessageOut, responses=ERRORS)
async def get(app: CurrentApp, wired: ServicesDep, message_id: MessageId = IdPath) -> Response:
    """Read one of the app's messages."""
    return message_response(await wired.service.message(message_id, app=app))


@router.get("/{message_id}/events", response_model=EventsOut, responses=ERRORS)
async def events(app: CurrentApp, wired: ServicesDep, page: EventsPage,
                 message_id: MessageId = IdPath) -> EventsOut:
    """The message's append-only history of transitions, publishes and checks, in order, a
    page at a time."""
    return events_out(await wired.service.events(message_id, app=app, limit=page.limit,
                                                 cursor=page.cursor))
