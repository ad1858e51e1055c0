"""The check-back endpoint as a FastAPI router (the ``fastapi`` extra): the answers are
:class:`rms_client.checkback.CheckBackEndpoint`'s, and the route is documented in the
application's OpenAPI."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from rms_client.checkback import (
    DEFAULT_PATH,
    CheckBackEndpoint,
    CheckStatus,
    ReplayGuard,
    Resolver,
    TransactionResolver,
)
from rms_client.signing import DEFAULT_TOLERANCE_SECONDS


class CheckAnswer(BaseModel):
    status: CheckStatus


def checkback_router(resolve: Resolver, *, secrets: Sequence[str], path: str = DEFAULT_PATH,
                     tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
                     replay_guard: ReplayGuard | None = None,
                     resolve_transaction: TransactionResolver | None = None) -> APIRouter:
    """A router serving ``POST path`` for RMS check-backs, answered by ``resolve`` (a
    message) or ``resolve_transaction`` (a transaction of several messages; without it such a
    call answers ``unknown``)."""
    endpoint = CheckBackEndpoint(resolve, secrets=secrets, tolerance_seconds=tolerance_seconds,
                                 replay_guard=replay_guard,
                                 resolve_transaction=resolve_transaction)
    routes = APIRouter(tags=["rms"])

    @routes.post(path, response_model=CheckAnswer, responses={
        401: {"description": "signature missing, wrong or stale"},
        409: {"description": "webhook-id already used (replay)"},
        422: {"description": "body is not a check-back request"}})
    async def rms_check_back(request: Request) -> Response:
        """RMS asks whether the local transaction of a pending-send message committed."""
        answer = await endpoint.answer(request.headers, await request.body())
        return Response(answer.body, status_code=answer.status, media_type=answer.media_type)

    return routes
