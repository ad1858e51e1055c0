"""The calling app's own registration (its API key): which app a key belongs to."""

from __future__ import annotations

from fastapi import APIRouter

from message_service.api.convert import app_out
from message_service.api.messages import ERRORS
from message_service.deps import CurrentApp
from message_service.limits import LIMIT_RESPONSES, RATE_LIMIT
from message_service.schemas import AppOut
from message_service.strict_json import StrictJsonRoute

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/apps", tags=["apps"],
                   dependencies=[RATE_LIMIT], responses=LIMIT_RESPONSES)


@router.get("/me", response_model=AppOut, responses={401: ERRORS[401]})
async def me(app: CurrentApp) -> AppOut:
    """The app the API key belongs to (no secrets): a consumer checks at start that the app
    name it was configured with is the one its key acts as, since RMS knows a consumer by the
    app of its key and a record awaited from another name is skipped."""
    return app_out(app)
