"""Request dependencies: the wired use cases, the calling app (API key) and the admin token."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from rms.config import Settings
from rms.domain.errors import Invalid, Unauthorized
from rms.domain.models import App
from rms.domain.secrets import hash_api_key, same_secret
from rms.store.apps import AppStore
from rms.usecases.acks import Acks
from rms.usecases.health import Health
from rms.usecases.messages import MessageService
from rms.usecases.operators import Operators
from rms.usecases.resends import Resends


@dataclass
class Services:
    """Everything a request handler may use, built once per process in the lifespan: the use
    cases, and the app store for authentication only."""

    settings: Settings
    apps: AppStore
    service: MessageService
    acks: Acks
    operators: Operators
    resends: Resends
    health: Health
    auth_cache: AuthCache


class AuthCache:
    """API key hash -> App for a few seconds, sparing a query per request. A rotated key
    keeps working on other instances for at most ``ttl`` seconds (documented)."""

    def __init__(self, ttl: float, capacity: int = 10_000) -> None:
        self._ttl = ttl
        self._capacity = capacity
        self._entries: dict[str, tuple[float, App]] = {}

    def get(self, key_hash: str) -> App | None:
        entry = self._entries.get(key_hash)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key_hash: str, app: App) -> None:
        if self._ttl <= 0:
            return
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[key_hash] = (time.monotonic() + self._ttl, app)

    def clear(self) -> None:
        self._entries.clear()


async def services(request: Request) -> Services:
    """``async`` on purpose, like every dependency here: FastAPI runs a plain ``def``
    dependency in a thread pool, a thread hop per request."""
    wired: Services = request.app.state.services
    return wired


ServicesDep = Annotated[Services, Depends(services)]


def bearer_token(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token: send 'Authorization: Bearer <api key>'")
    return token.strip()


async def current_app(request: Request, wired: ServicesDep) -> App:
    token = bearer_token(request)
    key_hash = hash_api_key(token)
    cached = wired.auth_cache.get(key_hash)
    if cached is not None:
        return cached
    app = await wired.apps.by_api_key(token)
    if app is None:
        raise Unauthorized("the API key is not valid")
    wired.auth_cache.put(key_hash, app)
    return app


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


CurrentApp = Annotated[App, Depends(current_app)]
AdminActor = Annotated[str, Depends(admin)]
