"""Transactions of several messages: create, confirm, cancel and read (producer), confirm and
cancel by hand (operator)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response

from message_service.api.convert import json_response, transaction_response, transaction_summary
from message_service.api.messages import ERRORS
from message_service.deps import AdminActor, CurrentApp, RequestTrace, ServicesDep
from message_service.limits import LIMIT_RESPONSES, RATE_LIMIT, pending_places
from message_service.schemas import (
    MessageId,
    TransactionOut,
    TransactionPage,
    TransactionRequest,
)
from message_service.strict_json import StrictJsonRoute
from rms.domain.listings import TransactionFilter
from rms.domain.transactions import TransactionState
from rms_client.ids import MESSAGE_ID_PATTERN

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/transactions",
                   tags=["transactions"], dependencies=[RATE_LIMIT], responses=LIMIT_RESPONSES)
admin_router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/admin/transactions",
                         tags=["admin"])
IdPath = Path(pattern=MESSAGE_ID_PATTERN, description="the transaction id")


@router.post("", status_code=201, response_model=TransactionOut, responses=ERRORS)
async def create(body: TransactionRequest, app: CurrentApp, wired: ServicesDep,
                 request: Request, trace: RequestTrace) -> Response:
    """Prepare a transaction: its messages are stored pending-send and are confirmed or
    cancelled together; all or nothing."""
    async with pending_places(request, app.name, len(body.messages)) as places:
        view, created = await wired.transactions.create(app, body, trace)
        places.created = len(view.messages) if created else 0
    return transaction_response(view, 201 if created else 200)


@router.post("/{transaction_id}/confirm", response_model=TransactionOut, responses=ERRORS)
async def confirm(app: CurrentApp, wired: ServicesDep,
                  transaction_id: MessageId = IdPath) -> Response:
    """Confirm every message of the transaction at once, then publish them in their order
    (idempotent)."""
    return transaction_response(await wired.transactions.confirm(app, transaction_id))


@router.post("/{transaction_id}/cancel", response_model=TransactionOut, responses=ERRORS)
async def cancel(app: CurrentApp, wired: ServicesDep,
                 transaction_id: MessageId = IdPath) -> Response:
    """Cancel every message of the transaction at once; none is ever delivered
    (idempotent)."""
    return transaction_response(await wired.transactions.cancel(app, transaction_id))


@router.get("/{transaction_id}", response_model=TransactionOut, responses=ERRORS)
async def get(app: CurrentApp, wired: ServicesDep,
              transaction_id: MessageId = IdPath) -> Response:
    """One of the app's transactions, with its messages in order."""
    return transaction_response(await wired.transactions.get(transaction_id, app=app))


@admin_router.get("", response_model=TransactionPage, responses=ERRORS)
async def admin_list(
    _: AdminActor,
    wired: ServicesDep,
    state: TransactionState | None = None,
    dead: bool | None = None,
    app: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> Response:
    """Transactions of any app matching the filters, oldest first, a page at a time (each
    without its messages: ``message_ids`` lists them)."""
    found, next_cursor = await wired.transactions.search(
        TransactionFilter(state, dead, app), limit, cursor)
    return json_response({"items": [transaction_summary(t) for t in found],
                          "next_cursor": next_cursor})


@admin_router.get("/{transaction_id}", response_model=TransactionOut, responses=ERRORS)
async def admin_get(_: AdminActor, wired: ServicesDep,
                    transaction_id: MessageId = IdPath) -> Response:
    """Any app's transaction, with its messages in order."""
    return transaction_response(await wired.transactions.get(transaction_id))


@admin_router.post("/{transaction_id}/confirm", response_model=TransactionOut,
                   responses=ERRORS)
async def admin_confirm(actor: AdminActor, wired: ServicesDep,
                        transaction_id: MessageId = IdPath) -> Response:
    """Resolve a pending transaction by hand as committed (clears dead) and publish its
    messages in order."""
    return transaction_response(await wired.transactions.admin_confirm(transaction_id,
                                                                       actor=actor))


@admin_router.post("/{transaction_id}/cancel", response_model=TransactionOut,
                   responses=ERRORS)
async def admin_cancel(actor: AdminActor, wired: ServicesDep,
                       transaction_id: MessageId = IdPath) -> Response:
    """Resolve a pending transaction by hand as rolled back (clears dead)."""
    return transaction_response(await wired.transactions.admin_cancel(transaction_id,
                                                                      actor=actor))
