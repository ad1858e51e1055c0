"""Adaptive concurrency limiting: the limit follows latency (pure logic on a made-up clock),
the middleware refuses beyond it with a 503 problem and Retry-After at once and never limits
health or admin, and the real API refuses its excess that way under a burst of prepares."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable

import httpx
import orjson
import pytest
from starlette.types import Receive, Scope, Send

from message_service.admission import (
    Admission,
    AdmissionMiddleware,
    GradientLimit,
    LimitPolicy,
    NoApp,
    Unknown,
    finishes_work,
    limited,
)
from rms.config import Settings
from tests.integration.security.served import served
from tests.support import Api

POLICY = LimitPolicy(initial=50, minimum=5, maximum=200, tolerance=1.5, floor_seconds=0.0,
                     ceiling_seconds=0.25,
                     window_seconds=0.1, window_samples=10, long_windows=100, smoothing=0.2)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _feed(limit: GradientLimit, clock: Clock, latency: float, inflight: Callable[[], int],
          windows: int) -> None:
    for _ in range(windows):
        for _ in range(POLICY.window_samples):
            clock.now += POLICY.window_seconds / POLICY.window_samples
            limit.sample(latency, inflight())


def test_a_lightly_used_limit_does_not_grow() -> None:
    clock = Clock()
    limit = GradientLimit(POLICY, clock)
    _feed(limit, clock, 0.01, lambda: 10, windows=200)
    assert limit.limit == POLICY.initial


def test_a_limit_in_use_at_steady_latency_grows_to_its_maximum() -> None:
    clock = Clock()
    limit = GradientLimit(POLICY, clock)
    _feed(limit, clock, 0.01, lambda: int(limit.limit), windows=300)
    assert limit.limit == POLICY.maximum


def test_rising_latency_shrinks_the_limit_and_falling_latency_lets_it_grow_again() -> None:
    clock = Clock()
    limit = GradientLimit(POLICY, clock)
    _feed(limit, clock, 0.01, lambda: int(limit.limit), windows=20)
    grown = limit.limit
    _feed(limit, clock, 0.05, lambda: int(limit.limit), windows=20)  # five times slower
    assert limit.limit < grown / 2  # within two seconds
    shrunk = limit.limit
    _feed(limit, clock, 0.01, lambda: int(limit.limit), windows=40)
    assert limit.limit > shrunk * 2


def test_latency_that_rises_but_stays_under_the_floor_keeps_the_limit() -> None:
    """A quiet hour teaches a long-run latency of a few milliseconds; a calm load of more
    clients then makes each request some tens of milliseconds (the server batches its
    commits): under the floor that is no queue, and the limit in use keeps growing. Past the
    floor the gradient applies again."""
    floored = dataclasses.replace(POLICY, floor_seconds=0.05)
    clock = Clock()
    limit = GradientLimit(floored, clock)
    _feed(limit, clock, 0.005, lambda: int(limit.limit), windows=20)
    grown = limit.limit
    _feed(limit, clock, 0.04, lambda: int(limit.limit), windows=20)  # eight times slower
    assert limit.limit > grown
    _feed(limit, clock, 0.1, lambda: int(limit.limit), windows=20)  # past the floor
    assert limit.limit < grown / 2


def test_the_floor_may_not_exceed_the_ceiling() -> None:
    with pytest.raises(ValueError, match="RMS_ADMISSION_LATENCY_FLOOR_SECONDS"):
        Settings(dev_mode=True, admission_latency_floor_seconds=0.3,
                 admission_latency_ceiling_seconds=0.25)


def test_latency_over_the_ceiling_always_shrinks_the_limit() -> None:
    """However slow the long run has been, a window over the ceiling shrinks the limit (down
    to where the queue allowance balances the shrinking: a handful of requests)."""
    clock = Clock()
    limit = GradientLimit(POLICY, clock)
    _feed(limit, clock, 0.4, lambda: int(limit.limit), windows=60)  # slow from the start
    assert limit.limit < POLICY.initial / 4


def test_event_loop_lag_over_its_budget_shrinks_the_limit_at_steady_latency() -> None:
    """Requests wait in the socket while the loop is busy, which their own latency cannot show:
    the loop's lag shrinks the limit by itself, and the limit grows again once it is gone."""
    clock = Clock()
    limit = GradientLimit(POLICY, clock)
    _feed(limit, clock, 0.01, lambda: int(limit.limit), windows=20)
    grown = limit.limit

    def lagging(windows: int, lag: float) -> None:
        for _ in range(windows):
            for _ in range(POLICY.window_samples):
                clock.now += POLICY.window_seconds / POLICY.window_samples
                limit.lag(lag)
                limit.sample(0.01, int(limit.limit))

    lagging(20, POLICY.lag_budget_seconds * 4)
    assert limit.limit < grown / 2
    shrunk = limit.limit
    lagging(40, POLICY.lag_budget_seconds / 4)
    assert limit.limit > shrunk * 2


def test_a_window_needs_both_its_time_and_its_samples() -> None:
    clock = Clock()
    limit = GradientLimit(POLICY, clock)
    for _ in range(100):  # many samples within one window's time: no update yet
        limit.sample(1.0, 50)
    assert limit.long_rtt is None
    clock.now = POLICY.window_seconds
    limit.sample(1.0, 50)
    assert limit.long_rtt == pytest.approx(1.0)


@pytest.mark.parametrize(("path", "expected"), [
    ("/v1/messages", True), ("/v1/messages/m-1/confirm", True), ("/v1/transactions", True),
    ("/v1/admin/stats", False), ("/v1/admin", False), ("/healthz", False), ("/readyz", False),
    ("/metrics", False), ("/dashboard", False), ("/openapi.json", False)])
def test_only_the_producer_and_consumer_api_is_limited(path: str, expected: bool) -> None:
    assert limited(path) is expected


class KeyNames:
    """Callers for pure-logic tests: every API key is the name of its app."""

    def recall(self, api_key: str) -> str | NoApp | Unknown:
        return api_key

    async def identify(self, api_key: str) -> str | NoApp:
        return api_key


ORDERS = {"Authorization": "Bearer orders"}


def _held(count: int, entered: asyncio.Event, release: asyncio.Event
          ) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An application whose requests wait for ``release``; ``entered`` is set once ``count``
    of them are waiting."""
    waiting = 0

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal waiting
        waiting += 1
        if waiting == count:
            entered.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return slow


async def test_requests_beyond_the_limit_are_refused_at_once_with_retry_after() -> None:
    release, entered = asyncio.Event(), asyncio.Event()
    slow = _held(3, entered, release)

    policy = LimitPolicy(initial=3, minimum=1, maximum=3)
    app = AdmissionMiddleware(slow, Admission(GradientLimit(policy), KeyNames()))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rms.test",
                                 headers=ORDERS) as client:
        held = [asyncio.create_task(client.post("/v1/messages")) for _ in range(3)]
        await entered.wait()
        started = time.monotonic()
        refused = await client.post("/v1/messages/m-1/confirm")
        elapsed = time.monotonic() - started
        admin = asyncio.create_task(client.get("/v1/admin/stats"))  # never refused
        health = asyncio.create_task(client.get("/healthz"))
        await asyncio.sleep(0.01)
        release.set()
        answers = await asyncio.gather(*held, admin, health)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["content-type"] == "application/problem+json"
    problem = orjson.loads(refused.content)
    assert problem["type"] == "https://rms.dev/problems/overloaded"
    assert problem["status"] == 503
    assert elapsed < 0.02
    assert [a.status_code for a in answers] == [200] * 5
    assert app.gate.inflight == 0


@pytest.mark.parametrize(("method", "path", "expected"), [
    ("POST", "/v1/messages/m-1/confirm", True), ("POST", "/v1/messages/m-1/cancel", True),
    ("POST", "/v1/messages/m-1/ack", True), ("POST", "/v1/messages/batch/confirm", True),
    ("POST", "/v1/messages/batch/cancel", True), ("POST", "/v1/transactions/t-1/confirm", True),
    ("POST", "/v1/transactions/t-1/cancel", True), ("POST", "/v1/messages", False),
    ("POST", "/v1/messages/send", False), ("POST", "/v1/messages/batch", False),
    ("POST", "/v1/transactions", False), ("GET", "/v1/messages/m-1", False),
    ("GET", "/v1/messages/confirm", False)])
def test_confirms_cancels_and_acks_finish_work(method: str, path: str, expected: bool) -> None:
    assert finishes_work(method, path) is expected


async def test_at_the_limit_new_work_is_refused_and_finishing_work_still_admitted() -> None:
    """A prepare beyond the limit is refused; a confirm is admitted up to the maximum."""
    release, entered = asyncio.Event(), asyncio.Event()
    slow = _held(2, entered, release)

    app = AdmissionMiddleware(slow, Admission(GradientLimit(LimitPolicy(initial=2, minimum=1,
                                                                     maximum=3)), KeyNames()))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rms.test",
                                 headers=ORDERS) as client:
        held = [asyncio.create_task(client.post("/v1/messages")) for _ in range(2)]
        await entered.wait()
        prepare = await client.post("/v1/messages")
        confirm = asyncio.create_task(client.post("/v1/messages/m-1/confirm"))
        await asyncio.sleep(0.01)
        beyond_maximum = await client.post("/v1/messages/m-2/confirm")
        release.set()
        answers = await asyncio.gather(*held, confirm)
    assert prepare.status_code == 503
    assert beyond_maximum.status_code == 503
    assert [a.status_code for a in answers] == [200] * 3
    assert app.gate.inflight == 0


def test_the_limits_must_be_in_order(settings: Settings) -> None:
    with pytest.raises(ValueError, match="RMS_ADMISSION_MIN_LIMIT"):
        Settings(**{**settings.model_dump(), "admission_min_limit": 100,
                    "admission_initial_limit": 10})


async def test_the_api_refuses_a_burst_beyond_its_limit_and_serves_the_rest(
        api: Api, settings: Settings, topic: str) -> None:
    producer = await api.create_app("orders")
    narrow = Settings(**{**settings.model_dump(), "admission_enabled": True,
                         "admission_initial_limit": 2,
                         "admission_min_limit": 1, "admission_max_limit": 2})
    with served(narrow) as url:
        async with httpx.AsyncClient(base_url=url, headers=producer.headers,
                                     timeout=30) as client:
            answers = await asyncio.gather(*[
                client.post("/v1/messages", json={"topic": topic, "payload": {"n": n},
                                                  "check_url": "http://127.0.0.1:1/c"})
                for n in range(60)])
            statuses = sorted({a.status_code for a in answers})
            refused = [a for a in answers if a.status_code == 503]
            stats = await client.get("/v1/admin/stats", headers=api.admin)
    assert statuses == [201, 503], statuses
    # told to come back a share's worth (the limit, 2) per second, over one to five seconds
    told = sorted(int(a.headers["retry-after"]) for a in refused)
    assert told[:2] == [1, 1] and told[-1] == 5 and set(told) == {1, 2, 3, 4, 5}, told
    assert stats.status_code == 200


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    request: bytes) -> tuple[bytes, bytes]:
    """One request on a kept-alive connection: the answer's head and body."""
    writer.write(request)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = next(int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                  if line.startswith(b"content-length:"))
    return head, await asyncio.wait_for(reader.readexactly(length), 5)


async def test_under_uvicorn_the_protocol_refuses_before_the_app_and_keeps_the_connection(
        ) -> None:
    """The gate is asked before a request starts: a refused prepare never reaches the app, its
    body is dropped, and the same connection then carries an admitted request."""
    import uvicorn

    from message_service.http_protocol import DeadlineProtocol, configure_admission
    from rms.devstack.embedded import free_port

    reached: list[str] = []  # paths that reached the ASGI application at all

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    gate = Admission(GradientLimit(LimitPolicy(initial=1, minimum=1, maximum=1)), KeyNames())
    limited_endpoint = AdmissionMiddleware(endpoint, gate)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            reached.append(scope["path"])
            await limited_endpoint(scope, receive, send)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(
        app, host="127.0.0.1", port=port, http=DeadlineProtocol,
        lifespan="off", log_level="warning", access_log=False))
    configure_admission(gate)
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(1000):
            if server.started:
                break
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        gate.inflight, gate.per_app = 1, {"orders": 1}  # the limit (1) is reached
        body = b'{"topic": "t", "payload": 1}'
        head, answer = await _exchange(reader, writer, (
            b"POST /v1/messages HTTP/1.1\r\nhost: rms\r\ncontent-type: application/json\r\n"
            b"authorization: Bearer orders\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)))
        gate.inflight, gate.per_app = 0, {}
        again, served_answer = await _exchange(
            reader, writer,
            b"GET /v1/messages/m-1 HTTP/1.1\r\nhost: rms\r\nauthorization: Bearer orders\r\n\r\n")
        writer.close()
    finally:
        configure_admission(None)
        server.should_exit = True
        await asyncio.wait_for(serving, 10)
    assert head.startswith(b"HTTP/1.1 503 ")
    assert b"retry-after: 1" in head.lower()
    assert orjson.loads(answer)["type"] == "https://rms.dev/problems/overloaded"
    assert again.startswith(b"HTTP/1.1 200 ") and served_answer == b"ok"
    assert reached == ["/v1/messages/m-1"]
    assert gate.inflight == 0
