"""Overload protection: the gate's queue test (pure logic on a made-up clock), the middleware
holds new work beyond the limit until its turn and refuses it with a 503 problem and Retry-After
once the queue stands (and at once after), never limits health or admin, and the real API
refuses its excess that way under a burst of prepares."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

import httpx
import orjson
import pytest
from starlette.types import Receive, Scope, Send

from message_service.admission import (
    Admission,
    AdmissionMiddleware,
    LimitPolicy,
    NoApp,
    QueueDelay,
    Unknown,
    Waiter,
    finishes_work,
    limited,
)
from rms.config import Settings
from tests.integration.security.served import served
from tests.support import Api

POLICY = LimitPolicy(limit=4, maximum=8, target_seconds=0.005, interval_seconds=0.1)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _intervals(delay: QueueDelay, clock: Clock, wait: float, count: int,
               oldest: float | None = None) -> None:
    """``count`` intervals in each of which ten requests got their turn after ``wait``."""
    for _ in range(count):
        for _ in range(10):
            clock.now += POLICY.interval_seconds / 10
            delay.waited(wait)
            delay.tick(oldest)


def test_waits_under_the_target_never_overload_the_gate() -> None:
    clock = Clock()
    delay = QueueDelay(POLICY, clock)
    _intervals(delay, clock, 0.0, 50)
    _intervals(delay, clock, POLICY.target_seconds * 0.9, 50)
    assert not delay.overloaded


def test_one_prompt_turn_per_interval_keeps_the_gate_calm() -> None:
    """The shortest wait of an interval is judged: a queue that empties now and then (a
    closed loop's callers, each waiting for its answer) is no standing queue."""
    clock = Clock()
    delay = QueueDelay(POLICY, clock)
    for _ in range(50):
        for n in range(10):
            clock.now += POLICY.interval_seconds / 10
            delay.waited(0.0 if n == 5 else 1.0)
            delay.tick(None)
    assert not delay.overloaded


def test_a_queue_standing_over_an_interval_overloads_the_gate_until_it_refuses_nobody(
        ) -> None:
    clock = Clock()
    delay = QueueDelay(POLICY, clock)
    _intervals(delay, clock, POLICY.target_seconds * 2, 1)
    clock.now += POLICY.interval_seconds / 10
    delay.tick(None)
    assert delay.overloaded
    for _ in range(5):  # refusing: overloaded it stays
        clock.now += POLICY.interval_seconds * 1.5
        delay.refused()
        delay.tick(None)
        assert delay.overloaded
    clock.now += POLICY.interval_seconds * 1.5  # an interval that refused nobody
    delay.tick(None)
    assert not delay.overloaded


def test_a_request_waiting_a_whole_interval_without_its_turn_overloads_the_gate() -> None:
    clock = Clock()
    delay = QueueDelay(POLICY, clock)
    clock.now += POLICY.interval_seconds
    assert delay.tick(oldest_wait=POLICY.interval_seconds)
    assert delay.overloaded


def test_the_limit_may_not_exceed_the_maximum() -> None:
    with pytest.raises(ValueError, match="RMS_ADMISSION_LIMIT"):
        Settings(dev_mode=True, admission_limit=10, admission_max_limit=5)


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


class _CountedQueue(deque[Waiter]):
    """The gate's queue, counting the requests that joined it."""

    joined = 0

    def append(self, waiter: Waiter) -> None:
        self.joined += 1
        super().append(waiter)


async def test_requests_beyond_the_limit_are_refused_at_once_with_retry_after() -> None:
    release, entered = asyncio.Event(), asyncio.Event()
    slow = _held(3, entered, release)

    policy = LimitPolicy(limit=3, maximum=3)
    app = AdmissionMiddleware(slow, Admission(policy, KeyNames()))
    app.gate.waiting = queue = _CountedQueue()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rms.test",
                                 headers=ORDERS) as client:
        held = [asyncio.create_task(client.post("/v1/messages")) for _ in range(3)]
        await entered.wait()
        refused = await client.post("/v1/messages/m-1/confirm")  # answered while all are held
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
    assert queue.joined == 0  # refused without waiting for a place
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


async def test_at_the_limit_new_work_waits_its_turn_and_finishing_work_is_admitted() -> None:
    """A prepare beyond the limit waits for a place (and gets it when one frees up promptly);
    a confirm is admitted up to the maximum and refused beyond it."""
    release, entered = asyncio.Event(), asyncio.Event()
    slow = _held(2, entered, release)

    gate = Admission(LimitPolicy(limit=2, maximum=3, interval_seconds=10.0,
                                 longest_wait_seconds=10.0), KeyNames())
    app = AdmissionMiddleware(slow, gate)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rms.test",
                                 headers=ORDERS) as client:
        held = [asyncio.create_task(client.post("/v1/messages")) for _ in range(2)]
        await entered.wait()
        prepare = asyncio.create_task(client.post("/v1/messages"))
        confirm = asyncio.create_task(client.post("/v1/messages/m-1/confirm"))
        for _ in range(5000):  # until the prepare waits and the confirm is in
            if gate.waiting and gate.inflight == 3:
                break
            await asyncio.sleep(0.001)
        beyond_maximum = await client.post("/v1/messages/m-2/confirm")
        release.set()
        answers = await asyncio.gather(*held, confirm, prepare)
    assert beyond_maximum.status_code == 503
    assert [a.status_code for a in answers] == [200] * 4
    assert gate.inflight == 0 and not gate.waiting


async def test_a_standing_queue_is_refused_and_new_work_then_at_once() -> None:
    """New work that waits the longest wait without its turn is refused with 503 and
    Retry-After, with every request waiting; while the gate is overloaded, new work that finds
    no place is refused at once."""
    release, entered = asyncio.Event(), asyncio.Event()
    slow = _held(2, entered, release)
    gate = Admission(LimitPolicy(limit=2, maximum=8, interval_seconds=10.0,
                                 longest_wait_seconds=0.03), KeyNames())
    gate.waiting = queue = _CountedQueue()
    app = AdmissionMiddleware(slow, gate)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://rms.test",
                                 headers=ORDERS) as client:
        held = [asyncio.create_task(client.post("/v1/messages")) for _ in range(2)]
        await entered.wait()
        queued = await asyncio.gather(*[client.post("/v1/messages") for _ in range(3)])
        assert gate.delay.overloaded and queue.joined == 3
        at_once = await client.post("/v1/messages")
        release.set()
        answers = await asyncio.gather(*held)
    assert [a.status_code for a in queued] == [503] * 3
    assert all(a.headers["retry-after"] for a in queued)
    assert orjson.loads(queued[0].content)["type"] == "https://rms.dev/problems/overloaded"
    # refused without joining the queue (it would have waited out the longest wait there)
    assert at_once.status_code == 503 and queue.joined == 3
    assert [a.status_code for a in answers] == [200] * 2
    assert gate.inflight == 0 and not gate.waiting


async def test_the_api_refuses_a_burst_beyond_its_limit_and_serves_the_rest(
        api: Api, settings: Settings, topic: str) -> None:
    producer = await api.create_app("orders")
    narrow = Settings(**{**settings.model_dump(), "admission_enabled": True,
                         "admission_limit": 2, "admission_max_limit": 2})
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

    gate = Admission(LimitPolicy(limit=1, maximum=1, interval_seconds=10.0), KeyNames())
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
        gate.inflight, gate.per_app = 1, {"orders": 1}  # the limit (1) is reached ...
        gate.delay.overloaded = True  # ... while the queue stands
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
