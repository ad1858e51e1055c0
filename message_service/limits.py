"""Per-app limits of the app-token endpoints: a request rate limit and a cap on pending-send
messages, both answering 429 problem documents with ``Retry-After``.

Both are per API process, held in memory, so they cost no database round trip on the hot path:

- **Rate limit** (``RMS_APP_RATE_LIMIT_PER_SECOND``, ``RMS_APP_RATE_LIMIT_BURST``): a token
  bucket per app in each process. With N API instances behind a load balancer an app may make
  up to N times the configured rate in total; size the setting as "global limit / instances".
- **Pending cap** (``RMS_MAX_PENDING_PER_APP``): each process keeps the app's count of
  pending-send messages, re-read from the database at most once per
  :data:`PENDING_REFRESH_SECONDS` (an index-only count on ``messages_app_state``). Between two
  reads the process also counts the prepares it let through, so the cap can be overshot by at
  most what other instances admit within one refresh interval, plus one batch (a batch is
  admitted whole while the count is under the cap).

Wired as FastAPI dependencies (:data:`RATE_LIMIT`, :data:`PENDING_CAP`) on the routes; the
state lives in :class:`Limits`, created once per application in ``create_app``.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from fastapi import Depends, Request
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from message_service.deps import CurrentApp
from message_service.schemas import Problem
from rms.config import Settings
from rms.domain.errors import RateLimited
from rms.domain.states import State
from rms.store.schema import messages

PENDING_REFRESH_SECONDS = 1.0


@dataclass
class TokenBucket:
    """``rate`` tokens per second up to ``burst``; each request takes one."""

    rate: float
    burst: float
    tokens: float
    updated: float

    def take(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one is available."""
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RateLimiter:
    """One token bucket per app name, in this process."""

    def __init__(self, per_second: float, burst: int) -> None:
        self.per_second = per_second
        self.burst = float(max(burst, 1))
        self._buckets: dict[str, TokenBucket] = {}

    @property
    def enabled(self) -> bool:
        return self.per_second > 0

    def check(self, app: str, now: float | None = None) -> None:
        """Take a token for ``app`` or raise RateLimited with the wait in whole seconds."""
        moment = time.monotonic() if now is None else now
        bucket = self._buckets.get(app)
        if bucket is None:
            bucket = TokenBucket(self.per_second, self.burst, self.burst, moment)
            self._buckets[app] = bucket
        wait = bucket.take(moment)
        if wait > 0:
            raise RateLimited(
                f"app {app!r} exceeded its rate limit of {self.per_second:g} requests/s "
                f"(burst {self.burst:g}, RMS_APP_RATE_LIMIT_PER_SECOND per API instance); "
                "retry after the Retry-After seconds",
                retry_after_seconds=max(1, math.ceil(wait)),
            )


@dataclass
class _Count:
    value: int
    read_at: float
    admitted: int = 0  # prepares let through by this process since the read


@dataclass
class PendingCounter:
    """Cached count of an app's pending-send messages, re-read at most once per ``ttl``."""

    ttl: float = PENDING_REFRESH_SECONDS
    _counts: dict[str, _Count] = field(default_factory=dict)
    _reads: dict[str, asyncio.Task[int]] = field(default_factory=dict)

    async def current(self, engine: AsyncEngine, app: str) -> int:
        """The app's pending-send count as this process knows it (see the module doc)."""
        cached = self._counts.get(app)
        if cached is not None and time.monotonic() - cached.read_at < self.ttl:
            return cached.value + cached.admitted
        read = self._reads.get(app)
        if read is None:
            read = asyncio.ensure_future(self._read(engine, app))
            self._reads[app] = read
            read.add_done_callback(lambda task: self._finished(app, task))
        if cached is not None and not read.done():
            return cached.value + cached.admitted  # a read is on its way: do not wait for it
        return await asyncio.shield(read)

    def _finished(self, app: str, read: asyncio.Task[int]) -> None:
        self._reads.pop(app, None)
        if not read.cancelled():
            read.exception()  # retrieved: a failed read is the waiting request's 503

    def admitted(self, app: str) -> None:
        cached = self._counts.get(app)
        if cached is not None:
            cached.admitted += 1

    async def _read(self, engine: AsyncEngine, app: str) -> int:
        statement = select(func.count()).select_from(messages).where(
            messages.c.app == app, messages.c.state == State.PENDING_SEND.value)
        started = time.monotonic()
        async with engine.connect() as conn:
            value = int((await conn.execute(statement)).scalar_one())
        self._counts[app] = _Count(value, started)
        return value


class Limits:
    """The per-process limit state of one API application."""

    def __init__(self, settings: Settings) -> None:
        self.rate = RateLimiter(settings.app_rate_limit_per_second, settings.app_rate_limit_burst)
        self.max_pending = settings.max_pending_per_app
        self.pending = PendingCounter()

    async def check_pending(self, engine: AsyncEngine, app: str) -> None:
        if self.max_pending <= 0:
            return
        count = await self.pending.current(engine, app)
        if count >= self.max_pending:
            raise RateLimited(
                f"app {app!r} has {count} pending-send messages; the cap is "
                f"{self.max_pending} (RMS_MAX_PENDING_PER_APP): confirm or cancel some first",
                retry_after_seconds=max(1, math.ceil(PENDING_REFRESH_SECONDS)),
                extra={"pending_count": count, "pending_cap": self.max_pending},
            )
        self.pending.admitted(app)


def _limits(request: Request) -> Limits:
    found: Limits = request.app.state.limits
    return found


async def rate_limit(request: Request, app: CurrentApp) -> None:
    """Dependency of every app-token route: one token of the app's bucket, or 429."""
    limits = _limits(request)
    if limits.rate.enabled:
        limits.rate.check(app.name)


async def pending_cap(request: Request, app: CurrentApp) -> None:
    """Dependency of the prepare routes: 429 while the app is at its pending-send cap."""
    await _limits(request).check_pending(request.app.state.engine, app.name)


RATE_LIMIT = Depends(rate_limit)
LIMIT_RESPONSES: dict[int | str, dict[str, object]] = {
    429: {"model": Problem, "description": "rate limit or pending-send cap reached; see "
                                              "Retry-After"},
    503: {"model": Problem, "description": "overloaded or a dependency is down; retry"},
}
PENDING_CAP = Depends(pending_cap)
