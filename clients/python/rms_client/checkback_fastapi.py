"""The check-back endpoint as a FastAPI router (the ``fastapi`` extra); see
:func:`rms_client.checkback.checkback_router`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from rms_client.checkback import CheckBackEndpoint, CheckStatus


class CheckAnswer(BaseModel):
    status: CheckStatus


def router(endpoint: CheckBackEndpoint, path: str) -> APIRouter:
    """``POST path`` answered by ``endpoint``, documented in the application's OpenAPI."""
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
