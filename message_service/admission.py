"""Overload protection: the API runs at most ``limit`` authenticated requests of new work at
once (each app holding a fair share of it under overload); a request beyond waits at the gate
for its turn, and the gate refuses with 503 and ``Retry-After`` only while that wait shows a
standing queue, so that under overload the requests it takes keep their latency and the rest
learn to come back, instead of every request queueing until clients time out.

The signal is the time a request waits before its work starts (its sojourn at the gate), in the
manner of CoDel: the gate is overloaded once the shortest wait of an ``interval`` (100 ms)
stayed above the ``target`` (5 ms), i.e. for a whole interval no request got its turn promptly.
Then the requests waiting are refused, and so is every new one that finds no place, until an
interval passes in which no request found the gate full. A request's own latency plays no part:
a transaction's confirm waits for three ordered publishes by design, and a closed loop of
callers, each waiting for its answer, holds at most one request each, so as long as there are
no more callers than places (or they take their turns promptly) none of them is refused,
however slow each answer is. No request waits longer than ``longest_wait`` (15 ms): one that
waited that long is refused with all that wait, so an open loop beyond capacity is refused fast.

Only the producer and consumer API (``/v1/`` less ``/v1/admin``) is limited; health checks,
metrics, the dashboard and the admin API always get through. Within it, requests that finish
work already admitted (confirm, cancel and ack of a message, batch or transaction) have
priority over requests that start new work (prepares, sends, batches, transactions, reads):
only new work is held to the limit (and waits its turn), while finishing work is refused only
at the ``maximum``. Refusing a confirm would waste the prepare that was admitted before it and
leave a message for the check-back; and finishing work needs no limit of its own, since each
admitted prepare brings at most one confirm or cancel, so limiting new work bounds both.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Protocol

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from rms import metrics
from rms.domain.errors import Unauthorized
from rms.usecases.authentication import Authentication

RETRY_AFTER_SECONDS = 1  # the soonest a refused request is told to come back ...
RETRY_AFTER_SPREAD = 5  # ... and the latest (every RMS SDK waits up to 5 s by itself)


@dataclass(frozen=True, slots=True, eq=False)
class Answer:
    """A whole answer the gate gives instead of running the application (an RFC 9457 problem
    document), built once (and known by its identity)."""

    status: int
    reason: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    @classmethod
    def problem(cls, status: HTTPStatus, title: str, slug: str, detail: str,
                *headers: tuple[bytes, bytes]) -> Answer:
        body = orjson.dumps({"type": "https://rms.dev/problems/" + slug, "title": title,
                             "status": status.value, "detail": detail})
        return cls(status.value, status.phrase.encode(),
                   ((b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(body)).encode()), *headers), body)


REFUSALS = tuple(Answer.problem(
    HTTPStatus.SERVICE_UNAVAILABLE, "Overloaded", "overloaded",
    "the service is at its concurrency limit; retry after the Retry-After seconds",
    (b"retry-after", str(seconds).encode()))
    for seconds in range(RETRY_AFTER_SECONDS, RETRY_AFTER_SPREAD + 1))
REFUSAL = REFUSALS[0]
UNAUTHORIZED = Answer.problem(
    HTTPStatus.UNAUTHORIZED, "Unauthorized", "unauthorized",
    "missing or unknown API key: send 'Authorization: Bearer <api key>' with an app's key")


@dataclass(frozen=True, slots=True)
class LimitPolicy:
    """The gate's settings (``RMS_ADMISSION_*``)."""

    limit: int = 64  # requests of new work in flight at once
    maximum: int = 1000  # requests in flight at once, finishing work included
    target_seconds: float = 0.005  # a wait at the gate longer than this is a queue ...
    interval_seconds: float = 0.1  # ... when no request of an interval waited less
    longest_wait_seconds: float = 0.015  # one waiting this long is refused: the queue stands
    lag_probe_seconds: float = 0.005  # how often the event loop's lag is measured
    unauthenticated: int = 8  # requests in flight of an undetermined caller (their own bound)


@dataclass
class QueueDelay:
    """Whether the gate's queue stands (CoDel's test), from the waits of the requests that got
    their turn within the limit; pure logic with an injected clock."""

    policy: LimitPolicy
    clock: Callable[[], float] = time.monotonic
    overloaded: bool = field(init=False, default=False)
    _interval_start: float = field(init=False)
    _shortest: float = field(init=False, default=math.inf)  # the interval's shortest wait
    _refused: bool = field(init=False, default=False)  # whether the interval refused any

    def __post_init__(self) -> None:
        self._interval_start = self.clock()

    def waited(self, seconds: float) -> None:
        """A request got its turn after waiting ``seconds`` (0: a place was free)."""
        self._shortest = min(self._shortest, seconds)

    def refused(self) -> None:
        """A request found no place while overloaded."""
        self._refused = True

    def stood(self) -> None:
        """A request waited the longest wait without its turn: the queue stands."""
        self.overloaded, self._interval_start, self._shortest = True, self.clock(), math.inf

    def tick(self, oldest_wait: float | None) -> bool:
        """Judge the interval once it is over, ``oldest_wait`` being how long the request at
        the head of the queue has waited so far (None: none waits); True when the gate has
        just become overloaded."""
        now = self.clock()
        if now - self._interval_start < self.policy.interval_seconds:
            return False
        shortest = self._shortest if oldest_wait is None else min(self._shortest, oldest_wait)
        was = self.overloaded
        if was:  # calm again after an interval in which no request found the gate full
            self.overloaded = self._refused
        else:
            self.overloaded = math.isfinite(shortest) and shortest > self.policy.target_seconds
        self._interval_start, self._shortest, self._refused = now, math.inf, False
        return self.overloaded and not was


FINISHING_ACTIONS = ("/confirm", "/cancel", "/ack")


def limited(path: str) -> bool:
    """Whether a request path is subject to the limit: the producer and consumer API."""
    return path.startswith("/v1/") and not path.startswith("/v1/admin")


def finishes_work(method: str, path: str) -> bool:
    """Whether a limited request finishes work admitted before (confirm, cancel or ack of a
    message, a batch or a transaction) rather than starting new work."""
    return method == "POST" and path.endswith(FINISHING_ACTIONS)


def bearer_key(authorization: bytes | None) -> str | None:
    """The API key of an ``Authorization: Bearer <key>`` header value, or None when the request
    carries none (it cannot authenticate)."""
    if authorization is None:
        return None
    scheme, _, key = authorization.decode("latin-1").partition(" ")
    key = key.strip()
    return key if scheme.lower() == "bearer" and key else None


def authorization_of(scope: Scope) -> bytes | None:
    """The first ``Authorization`` header of a request (as Starlette reads it), or None."""
    return next((value for name, value in scope["headers"] if name == b"authorization"), None)


class Callers(Protocol):
    """Who sends a request, from its API key: the app's name, or :data:`NO_APP` for a key of
    no app."""

    def recall(self, api_key: str) -> str | NoApp | Unknown:
        """The answer if it is known without a query (:data:`UNKNOWN` otherwise)."""

    async def identify(self, api_key: str) -> str | NoApp: ...


class Unknown:
    """The answer of :meth:`Callers.recall` when only a query can tell."""


class NoApp:
    """The caller of a request known not to authenticate: it carries no API key, or a key of
    no app. The gate answers it 401 itself: it needs nothing of the process, and a 503 would
    invite it to come back with the same key."""


class Busy:
    """The caller of a request whose key only a query could tell, while as many such queries
    as the unauthenticated bound allows are already under way: refused with 503 at once, so
    that keys nobody has seen cost no query beyond the bound."""


UNKNOWN = Unknown()
NO_APP = NoApp()
BUSY = Busy()
UNDETERMINED = None  # the caller of a request whose key the database could not look up


class AuthenticatedCallers:
    """:class:`Callers` from the apps' API keys (the authentication use case and its cache)."""

    def __init__(self, authentication: Authentication) -> None:
        self.authentication = authentication

    def recall(self, api_key: str) -> str | NoApp | Unknown:
        known, app = self.authentication.recall(api_key)
        if not known:
            return UNKNOWN
        return NO_APP if app is None else app.name

    async def identify(self, api_key: str) -> str | NoApp:
        try:
            return (await self.authentication.app_for_key(api_key)).name
        except Unauthorized:
            return NO_APP


@dataclass(slots=True)
class Ticket:
    app: str | None  # whose admitted request it is


@dataclass(slots=True)
class Waiter:
    """A request of new work waiting at the gate for a place: whose, since when, and the
    future that gets its ticket (None: refused)."""

    app: str
    since: float
    turn: asyncio.Future[Ticket | None]


class Admission:
    """The gate of one server process: the limit, the requests in flight per app, the requests
    waiting for a place, and the decision to admit, hold or refuse. The middleware counts what
    it admits and holds what waits; the HTTP protocol asks the gate before it starts a request
    (:mod:`message_service.http_protocol`), so that under uvicorn a refusal is written straight
    to the connection, without an ASGI task or the framework's layers, and costs the process as
    little as possible while it is overloaded.

    Only authenticated work counts against the limit: the caller is known from the request's
    headers (the API key, looked up before the body is read). A request known not to
    authenticate (no key, or a key of no app) is answered 401 by the gate at once, so that
    clients without a valid key, however slowly they send, hold nothing; one whose key the
    database could not look up is held to a small bound of its own (``unauthenticated``) and
    left to the application, which answers it.

    Each app has a fair share of the limit, as in Netflix's partitioned limiter: while fewer
    requests than the limit are in flight any app may use the idle places; at the limit a
    request waits (or, while the gate is overloaded, is refused) only when its app holds its
    share (the limit divided among the apps with requests in flight, at least one place each)
    or more, so one app's burst queues and is refused before another app's steady work. Apps
    below their share may take the process a little over the limit (at most one share each).
    Places that free up go to the waiting requests in their order of arrival, to the first
    whose app fits."""

    def __init__(self, policy: LimitPolicy, callers: Callers | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.delay = QueueDelay(policy, clock)
        self.clock = clock
        self.callers = callers
        self.inflight = 0  # authenticated requests in flight (the limit's measure)
        self.per_app: dict[str, int] = {}  # of those, per app (apps with none are absent)
        self.unauthenticated = 0  # requests in flight of an undetermined caller
        self.waiting: deque[Waiter] = deque()  # new work waiting for a place, oldest first
        # the query under way per key the caches do not know: requests that carry the same key
        # meanwhile wait for its answer, so a new app's first burst costs one query
        self._lookups: dict[str, asyncio.Future[str | NoApp | None]] = {}
        self._probing = False
        self._second = -1  # the second of the refusals counted in _refused
        self._refused: dict[str | None, int] = {}  # refusals per caller in that second
        metrics.ADMISSION_LIMIT.set(policy.limit)

    def _probe(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        """Measure how late this timer runs (a metric), and come back after the interval."""
        now = loop.time()
        metrics.EVENT_LOOP_LAG.observe(max(0.0, now - due))
        period = self.policy.lag_probe_seconds
        loop.call_at(now + period, self._probe, loop, now + period)

    def recall(self, authorization: bytes | None) -> str | NoApp | Unknown:
        """The caller of a request from its Authorization header, when known without a query."""
        key = bearer_key(authorization)
        if key is None:
            return NO_APP
        if self.callers is None:
            return UNKNOWN
        return self.callers.recall(key)

    async def caller(self, authorization: bytes | None) -> str | NoApp | Busy | None:
        """The caller of a request from its Authorization header (a query when not cached,
        shared by the requests that carry the same key meanwhile, for at most
        ``unauthenticated`` keys at once: :data:`BUSY` beyond);
        :data:`UNDETERMINED` when the database cannot tell."""
        known = self.recall(authorization)
        if not isinstance(known, Unknown):
            return known
        key = bearer_key(authorization)
        if self.callers is None or key is None:
            return UNDETERMINED
        pending = self._lookups.get(key)
        if pending is None:
            if len(self._lookups) >= self.policy.unauthenticated:
                return BUSY
            pending = asyncio.ensure_future(self._identify(self.callers, key))
            self._lookups[key] = pending
            pending.add_done_callback(lambda _: self._lookups.pop(key, None))
        return await asyncio.shield(pending)

    @staticmethod
    async def _identify(callers: Callers, key: str) -> str | NoApp | None:
        try:
            return await callers.identify(key)
        except Exception:  # the database cannot tell: the framework answers the request
            return UNDETERMINED

    @property
    def lookups(self) -> int:
        """Queries under way for keys the caches do not know (one per key, however many
        requests carry it)."""
        return len(self._lookups)

    def answer(self, method: str, path: str, caller: str | NoApp | Busy | None
               ) -> Answer | None:
        """What the gate answers a request at once instead of the application (None: admit
        it, or let it wait for a place)."""
        if not limited(path):
            return None
        if isinstance(caller, NoApp):
            return UNAUTHORIZED
        if isinstance(caller, Busy):
            metrics.ADMISSION_REFUSED.inc()
            return self.refusal(None)
        return self.refusal(caller) if self.refuses(method, path, caller) else None

    def refusal(self, app: str | None) -> Answer:
        """The 503 of a refused request of ``app``: its refusals within one second are told to
        come back a share's worth per second over the next ``RETRY_AFTER_SPREAD`` seconds, so
        that a burst returns as places free up instead of all at once, to be refused again."""
        second = int(self.clock())
        if second != self._second:
            self._second, self._refused = second, {}
        earlier = self._refused.get(app, 0)
        self._refused[app] = earlier + 1
        places = self.policy.unauthenticated if app is None else self.share(app)
        return REFUSALS[min(len(REFUSALS) - 1, earlier // max(1, places))]

    def refuses(self, method: str, path: str, app: str | None) -> bool:
        """Whether a request of ``app`` (None: one whose caller is undetermined) is to be
        refused now (and counted as refused): beyond its bound, or new work that finds no
        place while the gate is overloaded (otherwise it waits for a place)."""
        if not limited(path):
            return False
        finishing = finishes_work(method, path)
        if self._fits(app, finishing):
            return False
        if app is not None and not finishing:
            self._tick()
            if not self.delay.overloaded:
                return False
            self.delay.refused()
        metrics.ADMISSION_REFUSED.inc()
        return True

    def _fits(self, app: str | None, finishing: bool) -> bool:
        policy = self.policy
        if app is None:
            return self.unauthenticated < policy.unauthenticated
        if finishing:
            return self.inflight < policy.maximum
        return self.inflight < policy.limit or self.per_app.get(app, 0) < self.share(app)

    def share(self, app: str) -> int:
        """The places ``app`` holds at the limit: the limit divided among the apps with
        requests in flight and this one, at least one."""
        active = len(self.per_app) + (app not in self.per_app)
        return max(1, self.policy.limit // active)

    async def enter(self, method: str, path: str, app: str | None) -> Ticket | None:
        """Admit a limited request the gate did not refuse at once: at once when it fits, or
        once a place is its turn; None when it is refused while it waits (counted)."""
        finishing = finishes_work(method, path)
        if app is None or finishing or self._fits(app, False):
            if app is not None and not finishing and self.inflight < self.policy.limit:
                self.delay.waited(0.0)
            return self.admitted(app)
        if self.refuses(method, path, app):
            return None
        loop = asyncio.get_running_loop()
        waiter = Waiter(app, self.clock(), loop.create_future())
        self.waiting.append(waiter)
        # the longest wait (the queue is judged on every arrival and departure besides)
        expiry = loop.call_later(self.policy.longest_wait_seconds, self._expire, waiter)
        try:
            return await waiter.turn
        except asyncio.CancelledError:
            if waiter.turn.done() and not waiter.turn.cancelled():
                ticket = waiter.turn.result()
                if ticket is not None:
                    self.finished(ticket)
            elif waiter in self.waiting:
                self.waiting.remove(waiter)
            raise
        finally:
            expiry.cancel()

    def admitted(self, app: str | None) -> Ticket:
        """Count one admitted request in; returns its ticket for :meth:`finished`."""
        if app is None:
            self.unauthenticated += 1
            return Ticket(None)
        if not self._probing:  # the first request: the loop to measure is running now
            self._probing = True
            loop = asyncio.get_running_loop()
            self._probe(loop, loop.time())
        self.inflight += 1
        self.per_app[app] = self.per_app.get(app, 0) + 1
        return Ticket(app)

    def finished(self, ticket: Ticket) -> None:
        app = ticket.app
        if app is None:
            self.unauthenticated -= 1
            return
        self.inflight -= 1
        held = self.per_app[app] - 1
        if held:
            self.per_app[app] = held
        else:
            del self.per_app[app]
        self._tick()
        self._give_turns()

    def _give_turns(self) -> None:
        """Give the places free now to the waiting requests whose app fits, oldest first."""
        if not self.waiting:
            return
        now = self.clock()
        for waiter in list(self.waiting):
            if waiter.turn.done():
                self.waiting.remove(waiter)
            elif self._fits(waiter.app, False):
                self.waiting.remove(waiter)
                self.delay.waited(now - waiter.since)
                waiter.turn.set_result(self.admitted(waiter.app))
            elif self.inflight >= self.policy.maximum:
                return

    def _tick(self) -> None:
        """Judge the queue; when it has just been found standing, refuse every request that
        waits (they have waited longer than the target already)."""
        oldest = self.clock() - self.waiting[0].since if self.waiting else None
        if self.delay.tick(oldest):
            while self.waiting:
                self._refuse(self.waiting.popleft())

    def _refuse(self, waiter: Waiter) -> None:
        if not waiter.turn.done():
            metrics.ADMISSION_REFUSED.inc()
            self.delay.refused()
            waiter.turn.set_result(None)

    def _expire(self, waiter: Waiter) -> None:
        """A request that waited the longest wait without its turn is refused, with every
        other request that waits: the queue stands."""
        if waiter in self.waiting:
            self.delay.stood()
            while self.waiting:
                self._refuse(self.waiting.popleft())


class AdmissionMiddleware:
    """Pure ASGI: answers a request the gate answers (when no protocol answered it before)
    with its pre-built 401 or 503, holds a request of new work until its turn, and counts
    every admitted limited one."""

    def __init__(self, app: ASGIApp, gate: Admission) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not limited(scope["path"]):
            await self.app(scope, receive, send)
            return
        caller = await self.gate.caller(authorization_of(scope))
        answer = self.gate.answer(scope["method"], scope["path"], caller)
        if answer is None and not isinstance(caller, NoApp | Busy):
            ticket = await self.gate.enter(scope["method"], scope["path"], caller)
            if ticket is not None:
                try:
                    await self.app(scope, receive, send)
                finally:
                    self.gate.finished(ticket)
                return
            answer = self.gate.refusal(caller)
        answer = answer or UNAUTHORIZED
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": list(answer.headers)})
        await send({"type": "http.response.body", "body": answer.body})
