"""One strict JSON parser for every request body.

Python's ``json`` module accepts ``NaN``, ``Infinity`` and unpaired UTF-16 surrogate escapes
(``"\\ud800"``): the first would be stored and published as ``null`` (JSON has no such
numbers), the second cannot be encoded as UTF-8 and fails deep in the database driver. orjson
refuses both while parsing, so such a body is answered 422 like any malformed JSON and nothing
is stored altered."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute


class StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = orjson.loads(await self.body())  # JSONDecodeError: FastAPI's 422
        return self._json


class StrictJsonRoute(APIRoute):
    """Every route of RMS: its handler reads the body with :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict
