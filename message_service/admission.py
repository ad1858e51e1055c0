"""Adaptive concurrency limiting: the API admits at most ``limit`` authenticated producer and
consumer requests at once (each app holding a fair share of it under overload) and refuses the
rest at once with 503 and ``Retry-After``, so that under
overload the requests it takes keep their latency and the rest learn to come back, instead of
every request queueing until clients time out.

The limit follows measured latency, in the manner of Netflix's gradient limiter and Envoy's
adaptive concurrency filter: requests are timed in short windows; a window's mean latency is
compared with the long-run latency (a slow moving average of the windows); while it stays
within ``tolerance`` times the long-run latency or under the latency floor (and under the
latency ceiling) the limit grows by a small queue allowance, and as it rises beyond that the
limit shrinks in proportion. The floor keeps a server that batches its work (group commit,
the producer's linger) from refusing a calm load: more requests in flight make each one a
little slower there while the server completes more of them, so latency that rose from a
quiet hour's few milliseconds to some tens is no sign of a queue; latency past the floor is.
The limit grows only while it is being used, so a quiet server keeps no stale, inflated limit.
A request's own latency starts when the application sees it; the time it waited before (in the
socket, while the event loop was busy) shows only as event-loop lag, so the loop
is probed too (a timer every few milliseconds, timed against when it was due): a window whose
mean lag exceeds the lag budget shrinks the limit in proportion, like a slow window. That keeps
a process that shares its cores from saturating its own loop, which would delay refusals as
much as answers. No fixed queue length is involved: the limit is a number of requests in
flight, learned from the server's own answers.

Only the producer and consumer API (``/v1/`` less ``/v1/admin``) is limited; health checks,
metrics, the dashboard and the admin API always get through. Within it, requests that finish
work already admitted (confirm, cancel and ack of a message, batch or transaction) have
priority over requests that start new work (prepares, sends, batches, transactions, reads):
only new work is held to the limit, while finishing work is refused only at the limit's
maximum. Refusing a confirm would waste the prepare that was admitted before it and leave a
message for the check-back; and finishing work needs no limit of its own, since each admitted
prepare brings at most one confirm or cancel, so limiting new work bounds both.
"""

from __future__ import annotations

import asyncio
import math
import time
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
    """How the limit moves (``RMS_ADMISSION_*`` settings)."""

    initial: int = 64
    minimum: int = 8
    maximum: int = 1000
    tolerance: float = 1.5  # recent latency may rise this far over the long-run latency ...
    floor_seconds: float = 0.05  # ... or up to this, whichever is more
    ceiling_seconds: float = 0.25  # a window slower than this always shrinks the limit
    window_seconds: float = 0.1  # latency is judged per window of at least this long ...
    window_samples: int = 10  # ... and at least this many requests
    long_windows: int = 600  # the long-run latency averages about this many windows
    smoothing: float = 0.2  # how far one window moves the limit towards its new value
    lag_budget_seconds: float = 0.01  # mean event-loop lag per window beyond this shrinks it
    lag_probe_seconds: float = 0.005  # how often the event loop's lag is measured
    unauthenticated: int = 8  # requests in flight of an undetermined caller (their own bound)


@dataclass
class GradientLimit:
    """The limit itself, fed with request latencies; pure logic with an injected clock."""

    policy: LimitPolicy
    clock: Callable[[], float] = time.monotonic
    limit: float = field(init=False)
    long_rtt: float | None = field(init=False, default=None)
    _window_start: float = field(init=False)
    _window_sum: float = field(init=False, default=0.0)
    _window_count: int = field(init=False, default=0)
    _window_peak_inflight: int = field(init=False, default=0)
    _lag_sum: float = field(init=False, default=0.0)
    _lag_count: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.limit = float(self.policy.initial)
        self._window_start = self.clock()

    def lag(self, seconds: float) -> None:
        """One measurement of how late the event loop ran a timer: the time requests wait
        before the server even reads them, which their own latencies cannot show."""
        self._lag_sum += seconds
        self._lag_count += 1

    def sample(self, latency_seconds: float, inflight: int) -> None:
        """One finished request: its latency, and how many were in flight when it ended."""
        self._window_sum += latency_seconds
        self._window_count += 1
        self._window_peak_inflight = max(self._window_peak_inflight, inflight)
        now = self.clock()
        if (self._window_count >= self.policy.window_samples
                and now - self._window_start >= self.policy.window_seconds):
            lag = self._lag_sum / self._lag_count if self._lag_count else 0.0
            self._update(self._window_sum / self._window_count, self._window_peak_inflight, lag)
            self._window_start, self._window_sum, self._lag_sum = now, 0.0, 0.0
            self._window_count = self._window_peak_inflight = self._lag_count = 0

    def _update(self, short_rtt: float, peak_inflight: int, lag: float = 0.0) -> None:
        policy = self.policy
        if self.long_rtt is None:
            self.long_rtt = short_rtt
        else:
            factor = 2.0 / (policy.long_windows + 1)
            self.long_rtt += (short_rtt - self.long_rtt) * factor
            if self.long_rtt > 2 * short_rtt:  # latency fell a lot: follow it faster
                self.long_rtt *= 0.95
        allowed = min(max(policy.tolerance * self.long_rtt, policy.floor_seconds),
                      policy.ceiling_seconds)
        gradient = max(0.5, min(1.0, allowed / max(short_rtt, 1e-6),
                                policy.lag_budget_seconds / max(lag, 1e-6)))
        if gradient >= 1.0 and peak_inflight < self.limit / 2:
            return  # not using half of it: no evidence that more would be served well
        target = self.limit * gradient + math.sqrt(self.limit)
        smoothed = self.limit * (1 - policy.smoothing) + target * policy.smoothing
        self.limit = max(float(policy.minimum), min(float(policy.maximum), smoothed))


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
    """One admitted request: whose it is and when it started."""

    app: str | None
    started: float


class Admission:
    """The gate of one server process: the limit, the requests in flight per app, and the
    decision to admit or refuse. The middleware counts and times what it admits; the HTTP
    protocol asks the gate before it starts a request (:mod:`message_service.http_protocol`),
    so that under uvicorn a refusal is written straight to the connection, without an ASGI
    task or the framework's layers, and costs the process as little as possible while it is
    overloaded.

    Only authenticated work counts against the limit: the caller is known from the request's
    headers (the API key, looked up before the body is read). A request known not to
    authenticate (no key, or a key of no app) is answered 401 by the gate at once, so that
    clients without a valid key, however slowly they send, hold nothing; one whose key the
    database could not look up is held to a small bound of its own (``unauthenticated``) and
    left to the application, which answers it.

    Under overload each app has a fair share of the limit, as in Netflix's partitioned limiter:
    while fewer requests than the limit are in flight any app may use the idle places; at the
    limit an app is refused only when it holds its share (the limit divided among the apps with
    requests in flight, at least one place each) or more, so one app's burst is refused before
    another app's steady work. Apps below their share may take the process a little over the
    limit (at most one share each), which the limit's latency feedback then corrects."""

    def __init__(self, limit: GradientLimit, callers: Callers | None = None) -> None:
        self.limit = limit
        self.callers = callers
        self.inflight = 0  # authenticated requests in flight (the limit's measure)
        self.per_app: dict[str, int] = {}  # of those, per app (apps with none are absent)
        self.unauthenticated = 0  # requests in flight of an undetermined caller
        # the query under way per key the caches do not know: requests that carry the same key
        # meanwhile wait for its answer, so a new app's first burst costs one query
        self._lookups: dict[str, asyncio.Future[str | NoApp | None]] = {}
        self._probing = False
        self._second = -1  # the second of the refusals counted in _refused
        self._refused: dict[str | None, int] = {}  # refusals per caller in that second
        metrics.ADMISSION_LIMIT.set(limit.limit)

    def _probe(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        """Measure how late this timer runs, and come back after the probe interval."""
        now = loop.time()
        late = max(0.0, now - due)
        self.limit.lag(late)
        metrics.EVENT_LOOP_LAG.observe(late)
        period = self.limit.policy.lag_probe_seconds
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
            if len(self._lookups) >= self.limit.policy.unauthenticated:
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
        """What the gate answers a request instead of the application (None: admit it)."""
        if not limited(path):
            return None
        if isinstance(caller, NoApp):
            return UNAUTHORIZED
        if isinstance(caller, Busy):
            metrics.ADMISSION_REFUSED.inc()
            return self._refusal(None)
        return self._refusal(caller) if self.refuses(method, path, caller) else None

    def _refusal(self, app: str | None) -> Answer:
        """The 503 of a refused request of ``app``: its refusals within one second are told to
        come back a share's worth per second over the next ``RETRY_AFTER_SPREAD`` seconds, so
        that a burst returns as places free up instead of all at once, to be refused again."""
        second = int(self.limit.clock())
        if second != self._second:
            self._second, self._refused = second, {}
        earlier = self._refused.get(app, 0)
        self._refused[app] = earlier + 1
        places = self.limit.policy.unauthenticated if app is None else self.share(app)
        return REFUSALS[min(len(REFUSALS) - 1, earlier // max(1, places))]

    def refuses(self, method: str, path: str, app: str | None) -> bool:
        """Whether a request of ``app`` (None: one whose caller is undetermined) is to be
        refused now (and counted as refused)."""
        if not limited(path):
            return False
        if self._fits(app, finishes_work(method, path)):
            return False
        metrics.ADMISSION_REFUSED.inc()
        return True

    def _fits(self, app: str | None, finishing: bool) -> bool:
        policy = self.limit.policy
        if app is None:
            return self.unauthenticated < policy.unauthenticated
        if finishing:
            return self.inflight < policy.maximum
        limit = int(self.limit.limit)
        return self.inflight < limit or self.per_app.get(app, 0) < self.share(app)

    def share(self, app: str) -> int:
        """The places ``app`` holds at the limit: the limit divided among the apps with
        requests in flight and this one, at least one."""
        active = len(self.per_app) + (app not in self.per_app)
        return max(1, int(self.limit.limit) // active)

    def admitted(self, app: str | None) -> Ticket:
        """Count one admitted request in; returns its ticket for :meth:`finished`."""
        if app is None:
            self.unauthenticated += 1
            return Ticket(None, 0.0)
        if not self._probing:  # the first request: the loop to measure is running now
            self._probing = True
            loop = asyncio.get_running_loop()
            self._probe(loop, loop.time())
        self.inflight += 1
        self.per_app[app] = self.per_app.get(app, 0) + 1
        return Ticket(app, time.monotonic())

    def finished(self, ticket: Ticket) -> None:
        app = ticket.app
        if app is None:
            self.unauthenticated -= 1
            return
        self.limit.sample(time.monotonic() - ticket.started, self.inflight)
        self.inflight -= 1
        held = self.per_app[app] - 1
        if held:
            self.per_app[app] = held
        else:
            del self.per_app[app]
        metrics.ADMISSION_LIMIT.set(self.limit.limit)


class AdmissionMiddleware:
    """Pure ASGI: answers a request the gate answers (when no protocol answered it before)
    with its pre-built 401 or 503, and counts (and, when authenticated, times) every admitted limited
    one."""

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
            ticket = self.gate.admitted(caller)
            try:
                await self.app(scope, receive, send)
            finally:
                self.gate.finished(ticket)
            return
        answer = answer or UNAUTHORIZED
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": list(answer.headers)})
        await send({"type": "http.response.body", "body": answer.body})

