"""Who an API key belongs to: the app, looked up by the key's hash and kept for a few seconds,
sparing a query per request. A rotated key keeps working on other API instances for at most
that long (documented); on the instance that rotated it, :meth:`forget` ends it at once."""

from __future__ import annotations

import time

from rms.domain.errors import Unauthorized
from rms.domain.models import App
from rms.domain.secrets import hash_api_key
from rms.store.apps import AppStore


class Authentication:
    def __init__(self, apps: AppStore, ttl: float, capacity: int = 10_000) -> None:
        self._apps = apps
        self._ttl = ttl
        self._capacity = capacity
        self._entries: dict[str, tuple[float, App]] = {}

    async def app_for_key(self, api_key: str) -> App:
        """The app whose API key this is; Unauthorized when none."""
        key_hash = hash_api_key(api_key)
        entry = self._entries.get(key_hash)
        if entry is not None and entry[0] >= time.monotonic():
            return entry[1]
        app = await self._apps.by_api_key(api_key)
        if app is None:
            raise Unauthorized("the API key is not valid")
        self._remember(key_hash, app)
        return app

    def forget(self) -> None:
        """Drop every cached key (after a key or signing-secret rotation)."""
        self._entries.clear()

    def _remember(self, key_hash: str, app: App) -> None:
        if self._ttl <= 0:
            return
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[key_hash] = (time.monotonic() + self._ttl, app)
