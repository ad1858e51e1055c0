"""The load generator: its own process (``python -m bench.loadgen SPEC OUT``), so its CPU is
measured apart from the system under test. Drives real HTTP with :mod:`bench.httpclient`.

Kinds of transaction:

* ``happy``: prepare, then confirm (every ``cancel_every``-th one is cancelled instead);
* ``oneshot``: one ``POST /v1/messages/send``;
* ``bulk``: ``POST /v1/messages/batch`` of ``batch_size`` messages, then ``batch/confirm``
  (every ``cancel_every``-th batch is cancelled with ``batch/cancel``).

Modes: ``closed`` (``concurrency`` clients, each starting its next transaction when the last
one ended) and ``open`` (transaction ``n`` is scheduled at ``start + n / rate``, or through
``phases`` of ``[seconds, rate]`` one after the other; latency is measured from that scheduled
time, so queueing in the client counts: no coordinated omission). A transaction not finished
``timeout`` seconds after its start is abandoned as an error.

Failures are told apart: a *refusal* is an answer of 429 or 503 (the server shedding load; the
transaction ends there, and a refused confirm or cancel leaves its message to the check-back),
a *time-out* is a request not answered within ``request_timeout`` (or a transaction within
``timeout``), and every other failure is an *other error*. Refusals are not errors.

The output (JSON) lists every transaction as ``[n, outcome, t0, t1, t2]``: ``t0`` the
(scheduled) start, ``t1`` the end of prepare (or send), ``t2`` the end of confirm/cancel, all
``time.time()`` seconds, comparable with the consumer's clock and the database's. With
``record_requests``, every request is listed too, as ``[n, step, status, start, end,
retry_after, sent]`` (``status`` the HTTP status, ``"timeout"`` or ``"error"``; ``start`` when
the transaction asked for it, ``sent`` when it went out on a connection, after any wait for one
of the pool's connections, None without an answer), and the generator's own event-loop lag as
``[time, seconds]`` every ``LAG_PROBE_SECONDS`` (how late a timer ran: time the generator's
clock adds to every latency it measures).
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.httpclient import HttpError, Pool

CONFIRMED, CANCELLED, ERROR, DROPPED = "confirmed", "cancelled", "error", "dropped"
REFUSED = "refused"  # the prepare (or send, or batch) was refused: nothing was written
REFUSED_AFTER_PREPARE = "refused-after-prepare"  # the message waits for its check-back
REFUSAL_STATUSES = (429, 503)
TIMEOUT, OTHER = "timeout", "error"  # request statuses that are not HTTP answers
LAG_PROBE_SECONDS = 0.005


class Refused(HttpError):
    """The server refused the request (429 or 503): it is shedding load."""

    def __init__(self, step: str, status: int, retry_after_seconds: float = 0.0) -> None:
        super().__init__(f"{step} refused with {status}")
        self.step = step
        self.retry_after_seconds = retry_after_seconds
        self.prepared_at: float | None = None  # set when the message was prepared before


@dataclass
class Spec:
    base_url: str
    token: str
    kind: str  # happy | oneshot | bulk | transaction
    mode: str  # closed | open
    id_prefix: str
    topic: str
    check_url: str
    concurrency: int = 1
    rate: float = 0.0
    transactions: int | None = None
    duration: float = 5.0
    cancel_every: int = 20
    batch_size: int = 500
    max_in_flight: int = 5000
    connections: int = 256
    timeout: float = 30.0  # a transaction not finished by then (queueing included) is an error
    keys: int = 0  # >0: message n gets the key "k<n % keys>" (the ordered path)
    phases: list[list[float]] = field(default_factory=list)  # open loop: [seconds, rate] each
    request_timeout: float = 0.0  # >0: a request not answered by then is a time-out
    record_requests: bool = False
    # closed loop: a client whose transaction was refused waits the Retry-After seconds before
    # its next one, as the RMS SDKs do (False: it starts the next one at once)
    honor_retry_after: bool = False


def message_ids(spec_kind: str, id_prefix: str, n: int, batch_size: int) -> list[str]:
    """The message ids of transaction ``n`` (one, or ``batch_size`` for bulk and for a
    transaction of several messages)."""
    if spec_kind in ("bulk", "transaction"):
        return [f"{id_prefix}-{n}-{i}" for i in range(batch_size)]
    return [f"{id_prefix}-{n}"]


def is_cancelled(n: int, cancel_every: int) -> bool:
    return cancel_every > 0 and n % cancel_every == cancel_every - 1


@dataclass
class Outcome:
    transactions: list[list[Any]] = field(default_factory=list)
    requests: list[list[Any]] = field(default_factory=list)
    errors: int = 0  # time-outs and other errors (refusals are not errors)
    timeouts: int = 0
    refusals: int = 0
    error_samples: list[str] = field(default_factory=list)
    schedule_start: float = 0.0
    loop_lag: list[list[float]] = field(default_factory=list)

    def error(self, n: int, t0: float, what: str, timeout: bool = False) -> None:
        self.errors += 1
        self.timeouts += timeout
        if len(self.error_samples) < 10:
            self.error_samples.append(what)
        self.transactions.append([n, ERROR, t0, None, None])

    def refused(self, n: int, t0: float, t1: float | None) -> None:
        self.refusals += 1
        self.transactions.append([n, REFUSED if t1 is None else REFUSED_AFTER_PREPARE, t0, t1,
                                  time.time()])


class Driver:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.pool = Pool(spec.base_url, spec.connections)
        self.auth = f"authorization: Bearer {spec.token}\r\n".encode()
        self.out = Outcome()

    def _message(self, message_id: str, n: int) -> dict[str, Any]:
        body = {"message_id": message_id, "topic": self.spec.topic,
                "payload": {"n": n, "total": 9.5}, "check_url": self.spec.check_url}
        if self.spec.keys > 0:
            body["key"] = f"k{n % self.spec.keys}"
        return body

    async def _post(self, n: int, step: str, path: str, body: Any, expect: int) -> None:
        started = time.time()
        try:
            async with asyncio.timeout(self.spec.request_timeout or None):
                response = await self.pool.request("POST", path,
                                                   orjson.dumps(body) if body else b"", self.auth)
        except TimeoutError:
            self._record(n, step, TIMEOUT, started, False, None)
            raise
        except (HttpError, OSError):
            self._record(n, step, OTHER, started, False, None)
            raise
        self._record(n, step, response.status, started, response.retry_after, response.sent)
        if response.status in REFUSAL_STATUSES:
            raise Refused(step, response.status, response.retry_after_seconds)
        repeated = response.retried and expect == 201 and response.status == 200
        if response.status != expect and not repeated:  # a repeated prepare answers 200
            raise HttpError(f"{path} -> {response.status} {response.body[:200]!r}")

    def _record(self, n: int, step: str, status: int | str, started: float,
                retry_after: bool, sent: float | None) -> None:
        if self.spec.record_requests:
            self.out.requests.append([n, step, status, started, time.time(), retry_after, sent])

    async def probe_lag(self) -> None:
        """Record how late a timer of ``LAG_PROBE_SECONDS`` fires, until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LAG_PROBE_SECONDS
            await asyncio.sleep(LAG_PROBE_SECONDS)
            self.out.loop_lag.append([time.time(), max(0.0, loop.time() - due)])

    async def transaction(self, n: int, t0: float) -> float:
        """Run transaction ``n``; returns the seconds its refusal asked to wait (0 if none)."""
        try:
            async with asyncio.timeout(self.spec.timeout):
                await self._run(n, t0)
        except Refused as refused:
            self.out.refused(n, t0, refused.prepared_at)
            return refused.retry_after_seconds
        except (HttpError, OSError) as exc:
            self.out.error(n, t0, str(exc))
        except TimeoutError:
            limit = self.spec.request_timeout or self.spec.timeout
            self.out.error(n, t0, f"no answer within {limit:g}s", timeout=True)
        return 0.0

    async def _run(self, n: int, t0: float) -> None:
        kind, spec = self.spec.kind, self.spec
        ids = message_ids(kind, spec.id_prefix, n, spec.batch_size)
        cancel = is_cancelled(n, spec.cancel_every)
        end = "cancel" if cancel else "confirm"
        if kind == "oneshot":
            await self._post(n, "send", "/v1/messages/send", self._message(ids[0], n), 201)
            self.out.transactions.append([n, CONFIRMED, t0, time.time(), None])
            return
        if kind == "transaction":
            transaction_id = f"{spec.id_prefix}-{n}"
            members = [{"message_id": i, "topic": spec.topic, "payload": {"n": n, "total": 9.5}}
                       for i in ids]
            await self._post(n, "prepare", "/v1/transactions",
                             {"transaction_id": transaction_id, "check_url": spec.check_url,
                              "messages": members}, 201)
            second: tuple[str, Any] = (f"/v1/transactions/{transaction_id}/{end}", None)
        elif kind == "bulk":
            await self._post(n, "prepare", "/v1/messages/batch",
                             {"messages": [self._message(i, n) for i in ids]}, 201)
            second = (f"/v1/messages/batch/{end}", {"message_ids": ids})
        else:
            await self._post(n, "prepare", "/v1/messages", self._message(ids[0], n), 201)
            second = (f"/v1/messages/{ids[0]}/{end}", None)
        t1 = time.time()
        try:
            await self._post(n, end, *second, 200)
        except Refused as refused:
            refused.prepared_at = t1
            raise
        self.out.transactions.append([n, CANCELLED if cancel else CONFIRMED, t0, t1, time.time()])


async def closed_loop(driver: Driver) -> None:
    spec = driver.spec
    deadline = time.monotonic() + spec.duration
    counter = iter(range(sys.maxsize))

    def finished(n: int) -> bool:
        return n >= spec.transactions if spec.transactions else time.monotonic() > deadline

    async def client() -> None:
        for n in counter:
            if finished(n):
                return
            wait = await driver.transaction(n, time.time())
            if wait and spec.honor_retry_after:
                await asyncio.sleep(min(wait, max(0.0, deadline - time.monotonic())))

    await asyncio.gather(*(client() for _ in range(spec.concurrency)))


def schedule(spec: Spec) -> list[float]:
    """The open loop's start times, in seconds from its start: ``n / rate``, or each phase's
    ``[seconds, rate]`` after the one before."""
    if not spec.phases:
        total = spec.transactions or int(spec.rate * spec.duration)
        return [n / spec.rate for n in range(total)]
    times, offset = [], 0.0
    for seconds, rate in spec.phases:
        times += [offset + n / rate for n in range(int(seconds * rate))]
        offset += seconds
    return times


async def open_loop(driver: Driver) -> None:
    """Start each transaction at its scheduled time whatever the earlier ones are doing; one
    that would exceed ``max_in_flight`` is dropped (counted as an error), so an overloaded
    server cannot make the generator queue without bound."""
    spec = driver.spec
    start, running = time.time(), set[asyncio.Task[float]]()
    driver.out.schedule_start = start
    for n, offset in enumerate(schedule(spec)):
        scheduled = start + offset
        delay = scheduled - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if len(running) >= spec.max_in_flight:
            driver.out.errors += 1
            driver.out.transactions.append([n, DROPPED, scheduled, None, None])
            continue
        task = asyncio.create_task(driver.transaction(n, scheduled))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.wait(running)


async def drive(spec: Spec) -> dict[str, Any]:
    driver = Driver(spec)
    before = resource.getrusage(resource.RUSAGE_SELF)  # start-up (imports) not counted
    started = time.time()
    probe = asyncio.create_task(driver.probe_lag()) if spec.record_requests else None
    await (open_loop(driver) if spec.mode == "open" else closed_loop(driver))
    ended = time.time()
    if probe is not None:
        probe.cancel()
    driver.pool.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"spec": asdict(spec), "started": started, "ended": ended,
            "cpu_seconds": usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024, "errors": driver.out.errors,
            "timeouts": driver.out.timeouts, "refusals": driver.out.refusals,
            "schedule_start": driver.out.schedule_start, "requests": driver.out.requests,
            "loop_lag": driver.out.loop_lag,
            "dropped_connection_retries": driver.pool.dropped_retries,
            "error_samples": driver.out.error_samples,
            "transactions": driver.out.transactions}


def main(argv: list[str]) -> int:
    import uvloop

    spec = Spec(**json.loads(Path(argv[0]).read_text()))
    # The generator keeps a record of every request; a full collection walking them would
    # pause it, and the pause would be measured as the server's latency. A run is bounded, so
    # its few reference cycles wait for the process's end.
    gc.freeze()
    gc.disable()
    result = uvloop.run(drive(spec))
    Path(argv[1]).write_bytes(orjson.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
