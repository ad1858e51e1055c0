"""Request dependencies: the wired use cases, the calling app (API key) and the admin token."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Query, Request

from rms.config import Settings
from rms.domain.errors import Invalid, Unauthorized
from rms.domain.models import App
from rms.domain.secrets import same_secret
from rms.usecases.acks import Acks
from rms.usecases.authentication import Authentication
from rms.usecases.health import Health
from rms.usecases.messages import MessageService
from rms.usecases.operators import Operators
from rms.usecases.resends import Resends
from rms.usecases.transactions import Transactions
from rms_client.trace import TRACEPARENT, TRACESTATE, TraceContext, trace_context


@dataclass
class Services:
    """Everything a request handler may use, built once per process in the lifespan: the use
    cases."""

    settings: Settings
    service: MessageService
    acks: Acks
    operators: Operators
    resends: Resends
    health: Health
    authentication: Authentication
    transactions: Transactions


async def services(request: Request) -> Services:
    """``async`` on purpose, like every dependency here: FastAPI runs a plain ``def``
    dependency in a thread pool, a thread hop per request."""
    wired: Services = request.app.state.services
    return wired


ServicesDep = Annotated[Services, Depends(services)]


def bearer_token(request: Request) -> str:
    return token_of(request.headers.get("authorization", ""))


def token_of(authorization: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token: send 'Authorization: Bearer <api key>'")
    return token.strip()


async def current_app(request: Request, wired: ServicesDep) -> App:
    return await wired.authentication.app_for_key(bearer_token(request))


EVENTS_PAGE_MAX = 1000
OPERATOR_HEADER = "x-rms-operator"
_OPERATOR_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")


async def admin(request: Request, wired: ServicesDep) -> str:
    """The actor recorded in events: ``admin``, or ``admin:<name>`` when the caller names the
    operator in ``X-RMS-Operator`` (the ``rms dead`` CLI sends the user's name)."""
    token = bearer_token(request)
    expected = wired.settings.admin_token
    if expected is None or not same_secret(token, expected):
        raise Unauthorized("wrong admin token: this endpoint needs the admin token "
                           "(RMS_ADMIN_TOKEN of the deployment)")
    operator = request.headers.get(OPERATOR_HEADER)
    if operator is None:
        return "admin"
    if not _OPERATOR_NAME.fullmatch(operator):
        raise Invalid("X-RMS-Operator must be 1-64 characters of A-Za-z0-9._@-")
    return f"admin:{operator}"


async def request_trace(
    request: Request,
    traceparent: Annotated[str | None, Header(
        description="W3C Trace Context: stored with the message and carried to its Kafka "
                    "records and check-backs; an invalid value is ignored")] = None,
    tracestate: Annotated[str | None, Header(
        description="W3C Trace Context vendor state, kept with a valid traceparent")] = None,
) -> TraceContext | None:
    """The request's W3C trace context (every value of a repeated header counts), or None."""
    return trace_context(request.headers.getlist(TRACEPARENT), request.headers.getlist(TRACESTATE))


@dataclass(frozen=True, slots=True)
class Page:
    """A page of a history: at most ``limit`` entries after ``cursor``."""

    limit: int
    cursor: str | None


async def events_page(
    limit: Annotated[int, Query(ge=1, le=EVENTS_PAGE_MAX,
                                description="events per page (at most 1000)")] = EVENTS_PAGE_MAX,
    cursor: Annotated[str | None, Query(
        description="the next_cursor of the previous page")] = None,
) -> Page:
    return Page(limit, cursor)


CurrentApp = Annotated[App, Depends(current_app)]
EventsPage = Annotated[Page, Depends(events_page)]
AdminActor = Annotated[str, Depends(admin)]
RequestTrace = Annotated[TraceContext | None, Depends(request_trace)]
