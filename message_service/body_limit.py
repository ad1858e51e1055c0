"""Refuses request bodies over the limit with 413 before they are read into memory."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from message_service.problems import problem


class BodyTooLarge(Exception):
    pass


class BodyLimitMiddleware:
    """Checks ``Content-Length`` up front and counts streamed bytes for chunked bodies."""

    def __init__(self, app: ASGIApp, single_limit: int, batch_limit: int) -> None:
        self.app = app
        self.single_limit = single_limit
        self.batch_limit = batch_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.batch_limit if "/batch" in scope["path"] else self.single_limit
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, limit)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, counting_receive, send)
        except BodyTooLarge:
            await self._refuse(scope, receive, send, limit)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = problem(413, "Payload too large",
                           f"the request body exceeds {limit} bytes", "payload-too-large")
        await response(scope, receive, send)
