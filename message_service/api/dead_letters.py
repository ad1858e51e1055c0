"""Dead letters in bulk (admin token): ``POST /v1/admin/dead-letters/resend``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from pydantic import BaseModel, Field, StringConstraints

from message_service.api.convert import message_out
from message_service.api.messages import ERRORS
from message_service.deps import AdminActor, ServicesDep
from message_service.schemas import MessageOut, Strict, Topic
from message_service.strict_json import StrictJsonRoute
from rms.domain.listings import MessageFilter
from rms.usecases.resends import MAX_BULK_RESEND
from rms_client.ids import APP_NAME_PATTERN

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/admin/dead-letters",
                   tags=["admin"])


class DeadLetterResend(Strict):
    topic: Topic | None = Field(default=None, description="only this topic")
    app: Annotated[str, StringConstraints(pattern=APP_NAME_PATTERN)] | None = Field(
        default=None, description="only this producer app")
    consumer: Annotated[str, StringConstraints(pattern=APP_NAME_PATTERN)] | None = Field(
        default=None, description="only the dead letters this consumer app still owes")
    limit: int = Field(ge=1, le=MAX_BULK_RESEND,
                       description=f"at most this many messages (1-{MAX_BULK_RESEND})")
    dry_run: bool = Field(default=False,
                          description="only show what would be resent; change nothing")


class DeadLetterResendOut(BaseModel):
    dry_run: bool
    count: int
    messages: list[MessageOut] = Field(description="resent (or, in a dry run, would be)")


@router.post("/resend", response_model=DeadLetterResendOut, responses=ERRORS)
async def resend_dead_letters(body: DeadLetterResend, actor: AdminActor, wired: ServicesDep
                              ) -> DeadLetterResendOut:
    """Resend dead sent messages matching the filters, oldest first, up to the limit."""
    found = await wired.resends.resend_dead(MessageFilter(topic=body.topic, app=body.app,
                                                          consumer=body.consumer),
                                            body.limit, actor=actor, dry_run=body.dry_run)
    return DeadLetterResendOut(dry_run=body.dry_run, count=len(found),
                               messages=[message_out(m) for m in found])
