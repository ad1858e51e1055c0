"""One strict JSON parser for every request body.

Python's ``json`` module accepts ``NaN``, ``Infinity`` and unpaired UTF-16 surrogate escapes
(``"\\ud800"``): the first would be stored and published as ``null`` (JSON has no such
numbers), the second cannot be encoded as UTF-8 and fails deep in the database driver. orjson
refuses both while parsing, so such a body is answered 422 like any malformed JSON and nothing
is stored altered. A body with an integer literal of 19 digits or more is parsed by Python's
own parser, made as strict, because orjson would turn an integer beyond 64 bits into a float."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

# an integer literal this long may not fit 64 bits: orjson would read it as a float (altering
# it), Python's parser keeps it exact for the schema's own check to refuse
_LONG_NUMBER = re.compile(rb"\d{19,}")


def strict_loads(raw: bytes) -> Any:
    """Parse a request body; raises ``json.JSONDecodeError`` (FastAPI answers 422) for
    anything that is not strict JSON."""
    if _LONG_NUMBER.search(raw) is None:
        return orjson.loads(raw)
    return _exact_loads(raw)


def _exact_loads(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise json.JSONDecodeError(f"the body is not UTF-8 ({exc.reason})", "", exc.start) from None
    value = json.loads(text, parse_constant=_refuse_constant)
    _refuse_surrogates(value, text)
    return value


def _refuse_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not a JSON number", name, 0)


def _refuse_surrogates(value: Any, text: str) -> None:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if any("\ud800" <= c <= "\udfff" for c in item):
                raise json.JSONDecodeError("unpaired surrogate in a string", text, 0)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)


class StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_loads(await self.body())  # JSONDecodeError: FastAPI's 422
        return self._json


class StrictJsonRoute(APIRoute):
    """Every route of RMS: its handler reads the body with :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict
