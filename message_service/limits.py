"""Per-app limits of the app-token endpoints: a request rate limit and a cap on pending-send
messages, both answering 429 problem documents with ``Retry-After``.

Both are per API process, held in memory, so they cost no database round trip on the hot path:

- **Rate limit** (``RMS_APP_RATE_LIMIT_PER_SECOND``, ``RMS_APP_RATE_LIMIT_BURST``): a token
  bucket per app in each process. With N API instances behind a load balancer an app may make
  up to N times the configured rate in total; size the setting as "global limit / instances".
- **Pending cap** (``RMS_MAX_PENDING_PER_APP``): each process keeps the app's count of
  pending-send messages, re-read from the database at most once per
  :data:`PENDING_REFRESH_SECONDS` (an index-only count on ``messages_app_state``), plus the
  places its own prepares hold (a batch holds one per message) and the rows they created
  since that read. One process therefore never admits past the cap; with N API instances the
  cap can be overshot only by what the other instances admit within one refresh interval.

The rate limit is a FastAPI dependency (:data:`RATE_LIMIT`); the prepare routes hold their
places with :func:`pending_places`. The state lives in :class:`Limits`, created once per
application in ``create_app``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

from fastapi import Depends, Request

from message_service.deps import CurrentApp, Services
from message_service.schemas import Problem
from rms.config import Settings
from rms.domain.errors import RateLimited

PENDING_REFRESH_SECONDS = 1.0
Count = Callable[[str], Awaitable[int]]


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
class _Pending:
    """One app's pending-send count as this process knows it.

    ``snapshot`` is the database count read at the start of epoch ``read_epoch``. On top of it
    come the prepares admitted and not finished yet (``inflight``) and those that created a row
    since that read began (``created``, by the epoch in which they finished). A prepare that
    finished while the read ran may be counted twice, never not at all, so a process never
    admits past the cap."""

    snapshot: int = 0
    read_at: float = -math.inf
    read_epoch: int = 0
    epoch: int = 0
    inflight: int = 0
    created: Counter[int] = field(default_factory=Counter)
    read: asyncio.Task[None] | None = None

    def count(self) -> int:
        since = sum(n for epoch, n in self.created.items() if epoch >= self.read_epoch)
        return self.snapshot + self.inflight + since

    def read_done(self, snapshot: int, started: float, epoch: int) -> None:
        self.snapshot, self.read_at, self.read_epoch = snapshot, started, epoch
        for old in [e for e in self.created if e < epoch]:
            del self.created[old]


@dataclass
class PendingSlots:
    """``reserved`` pending-send places held by one request until :meth:`release`; the
    request sets ``created`` to how many of them became rows (a repeated prepare answered
    200, a 409 or an error creates none)."""

    state: _Pending | None
    reserved: int
    created: int = 0

    def release(self) -> None:
        if self.state is not None:
            self.state.inflight -= self.reserved
            self.state.created[self.state.epoch] += min(self.created, self.reserved)
            self.state = None


@dataclass
class PendingCounter:
    """Per-app pending-send counts, each re-read from the database at most once per ``ttl``."""

    ttl: float = PENDING_REFRESH_SECONDS
    _apps: dict[str, _Pending] = field(default_factory=dict)

    async def state(self, count: Count, app: str) -> _Pending:
        """The app's state, read once before its first use and refreshed in the background."""
        state = self._apps.setdefault(app, _Pending())
        if time.monotonic() - state.read_at >= self.ttl and state.read is None:
            state.epoch += 1
            state.read = asyncio.ensure_future(self._read(count, app, state, state.epoch))
        if state.read is not None and state.read_at == -math.inf:
            await asyncio.shield(state.read)  # no count yet: wait for the first one
        return state

    async def _read(self, count: Count, app: str, state: _Pending, epoch: int) -> None:
        started = time.monotonic()
        try:
            state.read_done(await count(app), started, epoch)
        finally:
            state.read = None


class Limits:
    """The per-process limit state of one API application."""

    def __init__(self, settings: Settings) -> None:
        self.rate = RateLimiter(settings.app_rate_limit_per_second, settings.app_rate_limit_burst)
        self.max_pending = settings.max_pending_per_app
        self.pending = PendingCounter()

    def check_rate(self, app: str) -> None:
        """One token of the app's bucket, or RateLimited (429)."""
        if self.rate.enabled:
            self.rate.check(app)

    async def reserve_pending(self, pending: Count, app: str, places: int) -> PendingSlots:
        """Hold ``places`` pending-send places for a prepare of that many messages, or raise
        RateLimited (429) if they would take the app past its cap. Counting and holding
        happen without a pause in between, so concurrent requests of one process never
        overshoot."""
        if self.max_pending <= 0:
            return PendingSlots(None, places)
        state = await self.pending.state(pending, app)
        count = state.count()
        if count + places > self.max_pending:
            raise RateLimited(
                f"app {app!r} has {count} pending-send messages; the cap is "
                f"{self.max_pending} (RMS_MAX_PENDING_PER_APP): confirm or cancel some first",
                retry_after_seconds=max(1, math.ceil(PENDING_REFRESH_SECONDS)),
                extra={"pending_count": count, "pending_cap": self.max_pending},
            )
        state.inflight += places
        return PendingSlots(state, places)


def _limits(request: Request) -> Limits:
    found: Limits = request.app.state.limits
    return found


async def rate_limit(request: Request, app: CurrentApp) -> None:
    """Dependency of every app-token route: one token of the app's bucket, or 429."""
    _limits(request).check_rate(app.name)


def pending_places(request: Request, app: str, places: int
                   ) -> AbstractAsyncContextManager[PendingSlots]:
    """The prepare routes' hold on ``places`` pending-send places (429 past the cap), given
    back when the request ends; the route sets how many became messages."""
    return hold_pending(_limits(request), request.app.state.services, app, places)


@asynccontextmanager
async def hold_pending(limits: Limits, wired: Services, app: str, places: int
                       ) -> AsyncIterator[PendingSlots]:
    """:func:`pending_places` of the application whose ``limits`` and use cases are given."""
    slots = await limits.reserve_pending(wired.service.pending_count, app, places)
    try:
        yield slots
    finally:
        slots.release()


RATE_LIMIT = Depends(rate_limit)
LIMIT_RESPONSES: dict[int | str, dict[str, object]] = {
    429: {"model": Problem, "description": "rate limit or pending-send cap reached; see "
                                              "Retry-After"},
    503: {"model": Problem, "description": "overloaded or a dependency is down; retry"},
}
