"""The three requests of every message's life (prepare, confirm, cancel) answered without the
framework's route matching, dependency solving and parameter binding, which cost a request more
CPU than RMS's own work on it.

:class:`HotPaths` takes such a request only when it is well formed: ``POST /v1/messages`` with a
JSON body (``Content-Type: application/json``) that is strict JSON and a valid prepare, or
``POST /v1/messages/{message_id}/confirm`` / ``cancel`` with a valid message id, and in both
cases a Bearer API key that names an app. It then makes the same calls as the routes of
:mod:`message_service.api.messages` (rate limit, pending-send places, use case, response), and
an error they raise is answered by the application's own exception handlers, as the framework
would. Everything else goes to the framework untouched (a body it read is replayed): another
route, a malformed or invalid body, a missing or unknown key, a URL root path, or FastAPI's
telemetry switched on. So every refusal keeps the framework's exact answer, and the routes
stay what the OpenAPI document describes."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request, Response
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from message_service.api.messages import cancel_one, confirm_one, prepare_one
from message_service.deps import Services, token_of
from message_service.limits import Limits, hold_pending
from message_service.schemas import MessageId, PrepareRequest
from message_service.strict_json import strict_loads
from rms.domain.models import App
from rms_client.trace import TRACEPARENT, TRACESTATE, TraceContext, trace_context

MESSAGES = "/v1/messages"
Handler = Callable[[Request, Any], Response | Awaitable[Response]]
_MESSAGE_ID: TypeAdapter[str] = TypeAdapter(MessageId)
_TRACE_HEADERS = (TRACEPARENT.encode(), TRACESTATE.encode())


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the fast path takes from a request to one of its routes, in the route's terms:
    the path template, path parameters, headers and body model the route declares, and the
    route's dependencies whose work the fast path does itself (rate limit, app key, the wired
    services, trace context). A test holds each equal to what the route declares, so a new
    parameter on a route cannot be silently ignored here."""

    path: str
    path_params: frozenset[str] = frozenset()
    headers: frozenset[str] = frozenset()
    body: type[BaseModel] | None = None
    dependencies: frozenset[str] = frozenset({"rate_limit", "current_app", "services"})


_PREPARE_BODY = PrepareRequest
_PREPARE = Inputs(MESSAGES, headers=frozenset({TRACEPARENT, TRACESTATE}), body=_PREPARE_BODY,
                  dependencies=frozenset({"rate_limit", "current_app", "services",
                                          "request_trace"}))
# by route name (message_service.api.messages)
INPUTS: dict[str, Inputs] = {
    "prepare": _PREPARE,
    "confirm": Inputs(MESSAGES + "/{message_id}/confirm", frozenset({"message_id"})),
    "cancel": Inputs(MESSAGES + "/{message_id}/cancel", frozenset({"message_id"})),
}


class HotPaths:
    """Pure ASGI middleware, the innermost one (inside the body limit and admission)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._handlers: dict[type[BaseException], Handler] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path")
                and "fastapi.telemetry" not in scope):
            path: str = scope["path"]
            if path == MESSAGES:
                await self._prepare(scope, receive, send)
                return
            transition = _transition(path)
            if transition is not None:
                await self._transition(scope, receive, send, *transition)
                return
        await self.app(scope, receive, send)

    async def _prepare(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _Headers(scope)
        if not headers.json:
            await self.app(scope, receive, send)
            return
        received = await _read(receive)
        replay = _replay(received, receive)
        request = _prepare_request(received)
        caller = None if request is None else await _caller(scope, headers)
        if request is None or caller is None:
            await self.app(scope, replay, send)
            return
        wired, limits, app = caller
        places = hold_pending(limits, wired, app.name, 1)
        await self._answer(scope, replay, send, limits, app, lambda: prepare_one(
            places, wired, app, request, headers.trace()))

    async def _transition(self, scope: Scope, receive: Receive, send: Send, message_id: str,
                          action: str) -> None:
        caller = await _caller(scope, _Headers(scope))
        if caller is None:
            await self.app(scope, receive, send)
            return
        wired, limits, app = caller
        answer = confirm_one if action == "confirm" else cancel_one
        await self._answer(scope, receive, send, limits, app,
                           lambda: answer(wired, app, message_id))

    async def _answer(self, scope: Scope, receive: Receive, send: Send, limits: Limits,
                      app: App, work: Callable[[], Awaitable[Response]]) -> None:
        """Take the app's rate-limit token and run ``work`` (the route's calls), then send its
        response, or the response of the application's handler of what they raised (an
        exception without one goes on to the server-error middleware, as from a route)."""
        try:
            limits.check_rate(app.name)
            response = await work()
        except Exception as exc:
            handler = self._handler(scope["app"], exc)
            if handler is None:
                raise
            handled = handler(Request(scope, receive), exc)
            response = await handled if inspect.isawaitable(handled) else handled
        await response(scope, receive, send)

    def _handler(self, owner: FastAPI, exc: Exception) -> Handler | None:
        """The handler Starlette's exception middleware would pick (by the exception's
        classes, most specific first); ``Exception`` itself is the server-error
        middleware's."""
        if self._handlers is None:
            self._handlers = {kind: handler for kind, handler in owner.exception_handlers.items()
                              if isinstance(kind, type) and kind is not Exception}
        for kind in type(exc).__mro__:
            if kind in self._handlers:
                return self._handlers[kind]
        return None


async def _caller(scope: Scope, headers: _Headers) -> tuple[Services, Limits, App] | None:
    """The wired use cases, the limits and the calling app, or None when the request does not
    authenticate (the framework then answers it)."""
    owner: FastAPI = scope["app"]
    wired: Services = owner.state.services
    limits: Limits = owner.state.limits
    try:
        app = await wired.authentication.app_for_key(token_of(headers.authorization))
    except Exception:
        return None
    return wired, limits, app


def _transition(path: str) -> tuple[str, str] | None:
    """``(message_id, action)`` of ``/v1/messages/{message_id}/confirm`` or ``/cancel`` with
    a valid id (a reserved one, ``batch``, names another route)."""
    if not path.startswith(MESSAGES + "/"):
        return None
    message_id, _, action = path[len(MESSAGES) + 1:].partition("/")
    if action not in ("confirm", "cancel"):
        return None
    try:
        return _MESSAGE_ID.validate_python(message_id), action
    except ValidationError:
        return None


def _prepare_request(received: list[Message]) -> PrepareRequest | None:
    """The body as the prepare route binds it (strict JSON, validated by the model as FastAPI
    does), or None for a body the framework refuses or a request not fully received."""
    if any(message["type"] != "http.request" for message in received):
        return None
    body = b"".join(message.get("body", b"") for message in received)
    if not body:
        return None
    try:
        return _PREPARE_BODY.model_validate(strict_loads(body), from_attributes=True)
    except Exception:
        return None


async def _read(receive: Receive) -> list[Message]:
    """The request's messages up to the end of its body (or its disconnect)."""
    received: list[Message] = []
    while True:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return received


def _replay(received: list[Message], receive: Receive) -> Receive:
    pending = list(received)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


class _Headers:
    """The request headers the hot paths read, in one pass (names arrive lower-cased; the
    first of a repeated header counts, as Starlette's ``get``, the trace headers all)."""

    __slots__ = ("_trace", "authorization", "json")

    def __init__(self, scope: Scope) -> None:
        authorization: bytes | None = None
        content_type: bytes | None = None
        trace: list[tuple[bytes, bytes]] = []
        for name, value in scope["headers"]:
            if name == b"authorization" and authorization is None:
                authorization = value
            elif name == b"content-type" and content_type is None:
                content_type = value
            elif name in _TRACE_HEADERS:
                trace.append((name, value))
        self.authorization = (authorization or b"").decode("latin-1")
        self.json = content_type is not None and _is_json(content_type)
        self._trace = trace

    def trace(self) -> TraceContext | None:
        """The W3C trace context, as the routes' ``RequestTrace`` reads it."""
        if not self._trace:
            return None
        parent, state = _TRACE_HEADERS
        return trace_context([v.decode("latin-1") for n, v in self._trace if n == parent],
                             [v.decode("latin-1") for n, v in self._trace if n == state])


def _is_json(content_type: bytes) -> bool:
    """``application/json`` with or without parameters (FastAPI reads more media types as
    JSON, ``application/*+json``: those go to the framework)."""
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json"
