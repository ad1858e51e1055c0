"""The load generator: its own process (``python -m bench.loadgen SPEC OUT``), so its CPU is
measured apart from the system under test. Drives real HTTP with :mod:`bench.httpclient`.

Kinds of transaction:

* ``happy``: prepare, then confirm (every ``cancel_every``-th one is cancelled instead);
* ``oneshot``: one ``POST /v1/messages/send``;
* ``bulk``: ``POST /v1/messages/batch`` of ``batch_size`` messages, then ``batch/confirm``
  (every ``cancel_every``-th batch is cancelled with ``batch/cancel``).

Modes: ``closed`` (``concurrency`` clients, each starting its next transaction when the last
one ended) and ``open`` (transaction ``n`` is scheduled at ``start + n / rate``; latency is
measured from that scheduled time, so queueing in the client counts: no coordinated omission).
A transaction not finished ``timeout`` seconds after its start is abandoned as an error.

The output (JSON) lists every transaction as ``[n, outcome, t0, t1, t2]``: ``t0`` the
(scheduled) start, ``t1`` the end of prepare (or send), ``t2`` the end of confirm/cancel, all
``time.time()`` seconds, comparable with the consumer's clock and the database's.
"""

from __future__ import annotations

import asyncio
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
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)

    def error(self, n: int, t0: float, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 10:
            self.error_samples.append(what)
        self.transactions.append([n, ERROR, t0, None, None])


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

    async def _post(self, path: str, body: Any, expect: int) -> None:
        response = await self.pool.request("POST", path, orjson.dumps(body) if body else b"",
                                           self.auth)
        repeated = response.retried and expect == 201 and response.status == 200
        if response.status != expect and not repeated:  # a repeated prepare answers 200
            raise HttpError(f"{path} -> {response.status} {response.body[:200]!r}")

    async def transaction(self, n: int, t0: float) -> None:
        try:
            async with asyncio.timeout(self.spec.timeout):
                await self._run(n, t0)
        except (HttpError, OSError) as exc:
            self.out.error(n, t0, str(exc))
        except TimeoutError:
            self.out.error(n, t0, f"no answer within {self.spec.timeout:g}s")

    async def _run(self, n: int, t0: float) -> None:
        kind, spec = self.spec.kind, self.spec
        ids = message_ids(kind, spec.id_prefix, n, spec.batch_size)
        cancel = is_cancelled(n, spec.cancel_every)
        if kind == "oneshot":
            await self._post("/v1/messages/send", self._message(ids[0], n), 201)
            self.out.transactions.append([n, CONFIRMED, t0, time.time(), None])
            return
        if kind == "transaction":
            transaction_id = f"{spec.id_prefix}-{n}"
            members = [{"message_id": i, "topic": spec.topic, "payload": {"n": n, "total": 9.5}}
                       for i in ids]
            await self._post("/v1/transactions", {"transaction_id": transaction_id,
                                                  "check_url": spec.check_url,
                                                  "messages": members}, 201)
            t1 = time.time()
            await self._post(f"/v1/transactions/{transaction_id}/"
                             f"{'cancel' if cancel else 'confirm'}", None, 200)
        elif kind == "bulk":
            await self._post("/v1/messages/batch",
                             {"messages": [self._message(i, n) for i in ids]}, 201)
            t1 = time.time()
            await self._post(f"/v1/messages/batch/{'cancel' if cancel else 'confirm'}",
                             {"message_ids": ids}, 200)
        else:
            await self._post("/v1/messages", self._message(ids[0], n), 201)
            t1 = time.time()
            await self._post(f"/v1/messages/{ids[0]}/{'cancel' if cancel else 'confirm'}",
                             None, 200)
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
            await driver.transaction(n, time.time())

    await asyncio.gather(*(client() for _ in range(spec.concurrency)))


async def open_loop(driver: Driver) -> None:
    """Start transaction ``n`` at ``start + n / rate`` whatever the earlier ones are doing; one
    that would exceed ``max_in_flight`` is dropped (counted as an error), so an overloaded
    server cannot make the generator queue without bound."""
    spec = driver.spec
    total = spec.transactions or int(spec.rate * spec.duration)
    start, running = time.time(), set[asyncio.Task[None]]()
    for n in range(total):
        scheduled = start + n / spec.rate
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
    await (open_loop(driver) if spec.mode == "open" else closed_loop(driver))
    ended = time.time()
    driver.pool.close()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"spec": asdict(spec), "started": started, "ended": ended,
            "cpu_seconds": usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024, "errors": driver.out.errors,
            "dropped_connection_retries": driver.pool.dropped_retries,
            "error_samples": driver.out.error_samples,
            "transactions": driver.out.transactions}


def main(argv: list[str]) -> int:
    import uvloop

    spec = Spec(**json.loads(Path(argv[0]).read_text()))
    result = uvloop.run(drive(spec))
    Path(argv[1]).write_bytes(orjson.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
