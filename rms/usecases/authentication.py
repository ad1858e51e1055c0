"""Who an API key belongs to: the app, looked up by the key's hash and kept for a few seconds,
sparing a query per request. A rotated key keeps working on other API instances for at most
that long (documented); on the instance that rotated it, :meth:`forget` ends it at once.

A key that matches no app is remembered too, for a shorter time (``miss_ttl``), so a client
repeating a wrong key costs one query per interval, not one per request. That cannot lock out
a valid key: RMS generates every key and shows it only once it is stored, so no client can
present it before it exists; the short interval and :meth:`forget` (called when an app is
created or its key rotated) bound even that case. Both caches are bounded, and concurrent
requests with one key share one query.

A key in use is looked up again in the background once half its time in the cache has passed,
so its entry is renewed before it expires: requests of an app that keeps sending never wait for
the lookup, and the admission gate, which must know the caller before it may refuse a request
without a query, never loses sight of it (an expired key made every request of that app wait
for a query queued behind the overloaded database, refusals included)."""

from __future__ import annotations

import asyncio
import time

from rms.domain.errors import Unauthorized
from rms.domain.models import App
from rms.domain.secrets import hash_api_key
from rms.store.apps import AppStore


class Authentication:
    def __init__(self, apps: AppStore, ttl: float, capacity: int = 10_000,
                 miss_ttl: float = 1.0) -> None:
        self._apps = apps
        self._ttl = ttl
        self._miss_ttl = miss_ttl
        self._capacity = capacity
        self._entries: dict[str, tuple[float, App]] = {}
        self._misses: dict[str, float] = {}
        self._inflight: dict[str, asyncio.Future[App | None]] = {}
        self._renewals: set[asyncio.Task[None]] = set()
        self._epoch = 0  # moved by forget(): a renewal begun before it is not kept

    def recall(self, api_key: str) -> tuple[bool, App | None]:
        """What the caches know of a key without a query: ``(True, app)`` for a known key,
        ``(True, None)`` for a key remembered as wrong, ``(False, None)`` when only a query
        can tell (the admission gate asks, before a request has started)."""
        key_hash = hash_api_key(api_key)
        now = time.monotonic()
        entry = self._entries.get(key_hash)
        if entry is not None and entry[0] >= now:
            if entry[0] - now < self._ttl / 2:
                self._renew(key_hash, api_key)
            return True, entry[1]
        return self._misses.get(key_hash, 0.0) >= now, None

    def _renew(self, key_hash: str, api_key: str) -> None:
        """Look a key in use up again in the background (once at a time)."""
        if key_hash in self._inflight:
            return
        renewal = asyncio.ensure_future(self._renewed(key_hash, api_key, self._epoch))
        self._renewals.add(renewal)
        renewal.add_done_callback(self._renewals.discard)

    async def _renewed(self, key_hash: str, api_key: str, epoch: int) -> None:
        try:
            app = await self._lookup(key_hash, api_key)
        except Exception:  # the entry expires as it would; a request asks again
            return
        if epoch != self._epoch:
            return
        if app is None:
            self._entries.pop(key_hash, None)
            self._remember_miss(key_hash)
        else:
            self._remember(key_hash, app)

    async def app_for_key(self, api_key: str) -> App:
        """The app whose API key this is; Unauthorized when none."""
        key_hash = hash_api_key(api_key)
        now = time.monotonic()
        entry = self._entries.get(key_hash)
        if entry is not None and entry[0] >= now:
            return entry[1]
        if self._misses.get(key_hash, 0.0) >= now:
            raise Unauthorized("the API key is not valid")
        app = await self._lookup(key_hash, api_key)
        if app is None:
            self._remember_miss(key_hash)
            raise Unauthorized("the API key is not valid")
        self._remember(key_hash, app)
        return app

    async def _lookup(self, key_hash: str, api_key: str) -> App | None:
        """One query per key at a time: concurrent requests with the same key share it."""
        pending = self._inflight.get(key_hash)
        if pending is None:
            pending = asyncio.ensure_future(self._apps.by_api_key(api_key))
            self._inflight[key_hash] = pending
            pending.add_done_callback(lambda done: self._settled(key_hash, done))
        return await asyncio.shield(pending)

    def _settled(self, key_hash: str, done: asyncio.Future[App | None]) -> None:
        self._inflight.pop(key_hash, None)
        if not done.cancelled():
            done.exception()  # retrieved here: every waiter may have gone

    def forget(self) -> None:
        """Drop every cached key, known and unknown (after an app is created or a key or
        signing secret rotated)."""
        self._entries.clear()
        self._misses.clear()
        self._epoch += 1

    def _remember(self, key_hash: str, app: App) -> None:
        if self._ttl <= 0:
            return
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[key_hash] = (time.monotonic() + self._ttl, app)

    def _remember_miss(self, key_hash: str) -> None:
        if self._miss_ttl <= 0:
            return
        now = time.monotonic()
        if len(self._misses) >= self._capacity:
            self._misses = {k: until for k, until in self._misses.items() if until >= now}
        if len(self._misses) >= self._capacity:  # all still live: keep the newer half
            self._misses = dict(list(self._misses.items())[self._capacity // 2:])
        self._misses[key_hash] = now + self._miss_ttl
