"""Refuses request bodies over the limit with 413 before they are read into memory."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from message_service.problems import problem


class BodyLimitMiddleware:
    """Checks ``Content-Length`` up front; a body without one (chunked) is read here, up to
    the limit and no further, then replayed to the app. (Raising from inside ``receive`` does
    not work: FastAPI turns any error while reading the body into a 400.)"""

    def __init__(self, app: ASGIApp, single_limit: int, batch_limit: int) -> None:
        self.app = app
        self.single_limit = single_limit
        self.batch_limit = batch_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.batch_limit if _many(scope["path"]) else self.single_limit
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if declared.isdigit() and int(declared) > limit:
                await self._refuse(scope, receive, send, limit)
                return
            await self.app(scope, receive, send)
            return
        buffered = await _read_at_most(receive, limit)
        if buffered is None:
            await self._refuse(scope, receive, send, limit)
            return
        await self.app(scope, _replay(buffered, receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = problem(413, "Payload too large",
                           f"the request body exceeds {limit} bytes", "payload-too-large")
        await response(scope, receive, send)


def _many(path: str) -> bool:
    """A request that carries many messages: a batch, or a transaction."""
    return "/batch" in path or path.rstrip("/") == "/v1/transactions"


async def _read_at_most(receive: Receive, limit: int) -> list[Message] | None:
    """The request's body messages, or None as soon as they exceed ``limit`` bytes."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages
        size += len(message.get("body", b""))
        if size > limit:
            return None
        if not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
