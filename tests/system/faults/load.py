"""Concurrent load with a recorder: producer clients (each message, or each RMS transaction of
2-4 messages, one local transaction with a planned fate), the producers' check-back endpoint
answering from their transactions, and a consumer that reads every record and acks it.
Everything they see goes into a History.

Producer fates (the ``PLANS`` weights): commit then confirm; roll back then cancel; commit and
crash before confirming (check-back repairs it); crash with the transaction open (it rolls
back; check-back cancels); a transaction still open when check-back comes (answers
``unknown``) that later commits or rolls back. A killed producer process is a cancelled client
task: its in-flight request is cut, its open transaction rolls back.

What a message is (``Mix``): a transaction's members span the app's two topics; a message
(alone or a member) may be ordered (the app's ordered topic, one of a few keys every client of
the app shares) and delayed (``delay_seconds`` or an absolute ``deliver_after``, 1-5 s ahead).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord
from aiokafka.errors import KafkaError

from rms.kafka.records import HEADER_AWAITING
from rms_client.ack_records import ack_value, signed_ack_headers
from tests.integration.checkback.servers import Call, Reply
from tests.system.faults.bounds import bounded
from tests.system.faults.cluster import Apps, ConsumerApp, Stack
from tests.system.faults.history import COMMITTED, OPEN, ROLLED_BACK, CheckAnswer, Consumed, History, Op

CHECK_AFTER = 1.0
POLICY = {"check_after_seconds": CHECK_AFTER, "max_checks": 40, "ack_timeout_seconds": 2.0,
          "max_deliveries": 12}
PLANS = {"commit": 50, "rollback": 15, "crash-after-commit": 10, "crash-open": 5, "slow": 20}
RETRY_SECONDS = 40.0  # a producer keeps retrying one request this long (faults last less)
REQUEST_TIMEOUT = 10.0
# a producer's last unit: its prepare and its confirm each retried (the last attempt started
# just before RETRY_SECONDS ran out), a slow producer's wait between them
FINISH_SECONDS = 2 * (RETRY_SECONDS + 2 * REQUEST_TIMEOUT) + 10.0
CANCEL_SECONDS = 30.0  # cancelled producer clients end (a request in flight is cut at once)
# the test consumer's Kafka clients: a fetch or a produce from a frozen or absent broker is
# given up after this (aiokafka's default, 40 s, would hold every partition's records back
# that long and let the messages run out of deliveries while the consumer waits); starting
# and stopping a client are bounded too (a stop flushes unsent acks, each at most this long)
KAFKA_REQUEST_MS = 5000
KAFKA_START_SECONDS = 30.0
KAFKA_STOP_SECONDS = 20.0
ANSWERS = {COMMITTED: "committed", ROLLED_BACK: "rolled_back", OPEN: "unknown"}
KEYS = ("k0", "k1", "k2", "k3")  # an app's ordering keys, shared by all its clients
DELAY = (1.0, 5.0)
# acks awaiting their answer at most: past it a record is left unacked (redelivered later);
# unbounded, a slow RMS lets thousands queue in the HTTP pool, whose bookkeeping then starves
# the event loop that also runs the fault proxies
ACKS_IN_FLIGHT = 64


@dataclass(frozen=True)
class Mix:
    """Shares of the load's new features: transactions among units, ordered and delayed among
    messages (members included), audited among single unordered messages (on the topic a
    consumer that never acks reads too)."""

    transactions: float = 0.2
    ordered: float = 0.25
    delayed: float = 0.15
    audited: float = 0.1


NO_FEATURES = Mix(0.0, 0.0, 0.0, 0.0)
# an audited message ends dead (its reader never acks): a short budget keeps that within the
# scenario's settling, and still leaves the other consumers several deliveries to ack it
AUDITED_POLICY = {"ack_timeout_seconds": 1.0, "max_deliveries": 4}


def check_back(history: History) -> Callable[[Call], Awaitable[Reply]]:
    """The producers' status endpoint: the truth of their local transactions (a message's or a
    whole transaction's)."""

    async def answer(call: Call) -> Reply:
        message_id = str(call.json.get("transaction_id") or call.message_id)
        truth = history.truth.get(message_id, OPEN)
        app = str(call.json.get("app"))
        history.answers.append(CheckAnswer(message_id, app, truth))
        return Reply.answer(ANSWERS[truth])

    return answer


@dataclass
class Producer:
    """One producer app's client; ``run`` makes messages until its deadline (which the
    scenario may push back while faults it must see are still to come)."""

    stack: Stack
    apps: Apps
    app: str
    history: History
    rng: random.Random
    plans: dict[str, int] = field(default_factory=lambda: dict(PLANS))
    flight: Counter[str] = field(default_factory=Counter)  # requests awaiting an answer
    mix: Mix = field(default_factory=Mix)
    serial: int = 0
    current: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.apps.producers[self.app]}"}

    async def run(self, deadline: Callable[[], float], prefix: str) -> None:
        try:
            while time.monotonic() < deadline():
                self.serial += 1
                await self.one(f"{prefix}-{self.serial}")
        except asyncio.CancelledError:  # killed: an open local transaction rolls back
            if self.current and self.history.truth.get(self.current) == OPEN:
                self.history.set_truth(self.current, ROLLED_BACK)
            raise

    async def one(self, unit: str) -> None:
        """One local transaction: a message, or an RMS transaction of several."""
        self.current = unit
        if self.rng.random() < self.mix.transactions:
            kind, base, body = "txn-", "/v1/transactions", self._transaction(unit)
        else:
            kind, base, body = "", "/v1/messages", self._audited(self._message(unit) | POLICY)
            self._count([body])
        self.history.set_truth(unit, OPEN)
        if not await self.call(f"{kind}prepare", unit, base, body):
            self.history.set_truth(unit, ROLLED_BACK)  # gave up: never committed
            return
        if not kind:
            await self.probe(unit)
        await self.finish(unit, self._plan(), kind, base)

    async def finish(self, unit: str, plan: str, kind: str = "",
                     base: str = "/v1/messages") -> None:
        if plan == "slow":  # still open when the first check-back comes
            await asyncio.sleep(CHECK_AFTER + self.rng.uniform(0.5, 2.5))
            plan = self.rng.choice(["commit", "rollback"])
        if plan in {"commit", "crash-after-commit"}:
            self.history.set_truth(unit, COMMITTED)
        else:
            self.history.set_truth(unit, ROLLED_BACK)
        if plan == "commit":
            await self.call(f"{kind}confirm", unit, f"{base}/{unit}/confirm")
        elif plan == "rollback":
            await self.call(f"{kind}cancel", unit, f"{base}/{unit}/cancel")

    def _message(self, message_id: str) -> dict[str, Any]:
        """A prepare body (without the check-back policy): maybe ordered, maybe delayed."""
        body: dict[str, Any] = {"message_id": message_id, "topic": self.apps.topic(self.app),
                                "payload": {"id": message_id},
                                "check_url": self.stack.check_url}
        if self.rng.random() < self.mix.ordered:
            body |= {"topic": self.apps.ordered_topic(self.app), "key": self.rng.choice(KEYS)}
        if self.rng.random() < self.mix.delayed:
            body |= self._delay()
        return body

    def _audited(self, body: dict[str, Any]) -> dict[str, Any]:
        """Maybe on the app's audit topic (never a keyed message: a dead one holds its key)."""
        if "key" in body or self.rng.random() >= self.mix.audited:
            return body
        self.history.features["audited-message"] += 1
        return body | {"topic": self.apps.audit_topic(self.app)} | AUDITED_POLICY

    def _count(self, bodies: list[dict[str, Any]]) -> None:
        for body in bodies:
            self.history.features["ordered-message"] += "key" in body
            self.history.features["delayed-message"] += bool(
                {"delay_seconds", "deliver_after"} & set(body))

    def _delay(self) -> dict[str, Any]:
        seconds = round(self.rng.uniform(*DELAY), 2)
        if self.rng.random() < 0.5:
            return {"delay_seconds": seconds}
        return {"deliver_after": (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()}

    def _transaction(self, transaction_id: str) -> dict[str, Any]:
        """2-4 members over the app's two topics, in their listed order."""
        size = self.rng.randint(2, 4)
        members = [self._message(f"{transaction_id}-{n}") for n in range(size)]
        last, ordered = members[-1], "key" in members[0]
        if ("key" in last) == ordered:  # the last member on the other topic: two topics
            if ordered:
                del last["key"]
                last["topic"] = self.apps.topic(self.app)
            else:
                last |= {"topic": self.apps.ordered_topic(self.app), "key": self.rng.choice(KEYS)}
        for member in members:
            del member["check_url"]
            member |= {k: POLICY[k] for k in ("ack_timeout_seconds", "max_deliveries")}
        self.history.transactions[transaction_id] = tuple(m["message_id"] for m in members)
        self.history.features["transaction"] += 1
        self._count(members)
        return {"transaction_id": transaction_id, "check_url": self.stack.check_url,
                "check_after_seconds": CHECK_AFTER, "max_checks": POLICY["max_checks"],
                "messages": members}

    async def probe(self, message_id: str) -> None:
        """Sometimes another app tries to read or change this message: always 404."""
        if self.rng.random() > 0.1:
            return
        other = next(a for a in self.apps.producers if a != self.app)
        path = self.rng.choice(["", "/confirm", "/cancel", "/events"])
        method = "GET" if path in {"", "/events"} else "POST"
        key = self.apps.producers[other]
        with contextlib.suppress(httpx.HTTPError):
            response = await self.stack.http.request(
                method, f"{self.stack.api}/v1/messages/{message_id}{path}",
                headers={"Authorization": f"Bearer {key}"}, timeout=REQUEST_TIMEOUT)
            self.history.ops.append(Op("probe", other, message_id, response.status_code))

    async def call(self, kind: str, message_id: str, path: str,
                   body: dict[str, Any] | None = None) -> bool:
        """One request, retried with the same id until a definite answer; True on 2xx."""
        deadline = time.monotonic() + RETRY_SECONDS
        while True:
            status = await self._attempt(kind, message_id, path, body)
            if status is not None and status < 500 and status != 429:
                return 200 <= status < 300
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(self.rng.uniform(0.1, 0.5))

    async def _attempt(self, kind: str, message_id: str, path: str,
                       body: dict[str, Any] | None) -> int | None:
        op = Op(kind, self.app, message_id, None)
        self.flight["requests"] += 1
        try:
            response = await self.stack.http.post(self.stack.api + path, json=body,
                                                  headers=self.headers, timeout=REQUEST_TIMEOUT)
        except httpx.HTTPError:
            self.history.ops.append(op)
            return None
        except asyncio.CancelledError:  # the producer died with this request in flight
            self.history.ops.append(op)
            raise
        finally:
            self.flight["requests"] -= 1
        self.history.ops.append(_answered(op, response))
        return response.status_code

    def _plan(self) -> str:
        return self.rng.choices(list(self.plans), weights=list(self.plans.values()))[0]


def _answered(op: Op, response: httpx.Response) -> Op:
    data = response.json() if response.status_code < 300 else {}
    return Op(op.kind, op.app, op.message_id, response.status_code, data.get("state"),
              data.get("app"), op.at, time.monotonic())


@dataclass
class Load:
    """Producer clients for both apps; a 'producer process' is a group of client tasks."""

    stack: Stack
    apps: Apps
    history: History
    rng: random.Random
    clients: int
    plans: dict[str, int] = field(default_factory=lambda: dict(PLANS))
    mix: Mix = field(default_factory=Mix)
    flight: Counter[str] = field(default_factory=Counter)
    stop_at: float = 0.0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    generation: int = 0

    def start(self, seconds: float) -> None:
        self.stop_at = time.monotonic() + seconds
        self.spawn()

    def spawn(self) -> None:
        self.generation += 1
        for n in range(self.clients):
            app = list(self.apps.producers)[n % len(self.apps.producers)]
            producer = Producer(self.stack, self.apps, app, self.history,
                                random.Random(self.rng.random()), self.plans, self.flight,
                                self.mix)
            prefix = f"{app}-g{self.generation}c{n}"
            self.tasks.append(asyncio.create_task(producer.run(lambda: self.stop_at, prefix)))

    async def kill_producers(self) -> int:
        """kill -9 of the producer 'process': cancel every client mid-flight, start anew."""
        killed = await self._cancel_running("the killed producer clients to end")
        self.tasks = [t for t in self.tasks if not t.cancelled()]
        if time.monotonic() < self.stop_at:
            self.spawn()
        return killed

    async def finish(self) -> None:
        """Wait for every client to end its last message (retries included)."""
        while self.tasks:
            task = self.tasks.pop()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def cancel(self) -> None:
        """Every client still running cancelled (a scenario that failed): none outlives it."""
        self.stop_at = 0.0
        await self._cancel_running("the cancelled producer clients to end")
        self.tasks.clear()

    async def _cancel_running(self, what: str) -> int:
        running = [t for t in self.tasks if not t.done()]
        for task in running:
            task.cancel()
        await bounded(asyncio.gather(*running, return_exceptions=True), CANCEL_SECONDS, what)
        return len(running)


async def _close(client: AIOKafkaConsumer | AIOKafkaProducer, what: str) -> None:
    """``client.stop()``, bounded: a Kafka client that cannot close is a Stall, not a hang."""
    with contextlib.suppress(KafkaError, OSError):
        await bounded(client.stop(), KAFKA_STOP_SECONDS, f"closing {what}")


@dataclass
class Consumer:
    """One consumer app: reads every record of its topics (recorded), skips a record whose
    ``rms-awaiting`` does not name it (it acked already), acks the others over HTTP or the ack
    topic, but crashes before acking some first deliveries so the recovery service has work
    (an app that never acks reads and stops there)."""

    stack: Stack
    app: ConsumerApp
    history: History
    rng: random.Random
    ack_topic: str
    task: asyncio.Task[None] | None = None
    acks: set[asyncio.Task[None]] = field(default_factory=set)
    restarts: int = 0
    # a start under way, both Kafka clients closed, then the acks in flight (HTTP ones)
    STOP_SECONDS: ClassVar[float] = (KAFKA_START_SECONDS + 2 * KAFKA_STOP_SECONDS
                                     + REQUEST_TIMEOUT + 10.0)

    stopping: bool = False
    errors: Counter[str] = field(default_factory=Counter)  # why the reader started again

    def start(self) -> None:
        self.stopping = False
        self.task = asyncio.create_task(self._run(), name="test-consumer")

    async def stop(self) -> None:
        """The reader and its acks ended; a reader that had failed raises its error here.

        aiokafka's ``stop`` of a consumer or producer swallows a cancellation that arrives
        while it closes (``suppress(CancelledError)`` around awaiting its own background
        tasks), and the reader would then start again: so it also ends on ``stopping``."""
        task, self.task = self.task, None
        if task is not None:
            self.stopping = True
            task.cancel()
            await bounded(asyncio.wait({task}), self.STOP_SECONDS, "the test consumer to stop")
            if not task.cancelled():
                task.result()
        await asyncio.gather(*self.acks, return_exceptions=True)

    async def restart(self) -> None:
        """A new consumer from the beginning (after the broker came back empty)."""
        await self.stop()
        self.restarts += 1
        self.start()

    async def _run(self) -> None:
        while not self.stopping:
            try:
                await self._consume()
            except (KafkaError, OSError) as error:  # a broker down (TimeoutError included)
                self._restarting(error)
                await asyncio.sleep(0.5)

    def _restarting(self, error: BaseException) -> None:
        """Counted; the first of each kind printed (a reader that cannot start reads nothing,
        and the messages run out of deliveries: the cause must be visible)."""
        kind = type(error).__name__
        if not self.errors[kind] and not self.stopping:
            print(f"test consumer: starting again after {error!r}", file=sys.stderr, flush=True)
        self.errors[kind] += 1

    async def _consume(self) -> None:
        bootstrap = self.stack.infra.bootstrap_servers
        # a pattern, not the topic names: a consumer subscribed to names waits in ``start``
        # until every one exists (RMS creates the plain topics on first use, and a broker that
        # lost its log has none), a pattern takes each topic as the metadata shows it
        pattern = "^(" + "|".join(re.escape(t) for t in self.app.topics) + ")$"
        # read_committed, as the client libraries read: the atomic-publish invariant checks
        # that a transaction's members published together are read all or none
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                    auto_offset_reset="earliest", metadata_max_age_ms=1000,
                                    request_timeout_ms=KAFKA_REQUEST_MS,
                                    isolation_level="read_committed")
        consumer.subscribe(pattern=pattern)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False,
                                    request_timeout_ms=KAFKA_REQUEST_MS)
        try:
            async with asyncio.timeout(KAFKA_START_SECONDS):
                await consumer.start()
                await producer.start()
            while not self.stopping:
                batch = await consumer.getmany(timeout_ms=200)
                for record in (r for part in batch.values() for r in part):
                    self._received(record, producer)
        finally:
            await _close(consumer, "the test consumer's Kafka consumer")
            await _close(producer, "the test consumer's ack producer")

    def _received(self, record: ConsumerRecord[bytes, bytes], producer: AIOKafkaProducer) -> None:
        headers = {k: v.decode() for k, v in record.headers}
        awaiting = headers.get(HEADER_AWAITING)
        consumed = Consumed(headers["rms-message-id"], headers["rms-app"], record.topic,
                            int(headers["rms-delivery"]), record.partition, record.offset,
                            record.timestamp / 1000, consumer=self.app.name,
                            awaiting=None if awaiting is None else tuple(awaiting.split(",")))
        self.history.consumed.append(consumed)
        if consumed.awaiting is not None and self.app.name not in consumed.awaiting:
            self.history.features["record-skipped-acked"] += 1
            return  # acked already: a redelivery for the others
        if not self.app.acks:
            return
        if consumed.delivery == 1 and self.rng.random() < self.app.crash_before_ack:
            self.history.features["crash-before-ack"] += 1
            return  # "crashed before acking": the recovery service delivers it again
        if len(self.acks) >= ACKS_IN_FLIGHT:
            return  # a consumer's bounded concurrency: this one comes again, acked later
        task = asyncio.create_task(self._ack(consumed.message_id, producer,
                                             headers.get("rms-created-at", "")))
        self.acks.add(task)
        task.add_done_callback(self.acks.discard)

    async def _ack(self, message_id: str, producer: AIOKafkaProducer,
                   created_at: str) -> None:
        if self.rng.random() < 0.25:
            value = ack_value(message_id, self.app.name, created_at)
            signed = signed_ack_headers([self.app.secret], value)
            # recorded before it is sent: a send that times out may still reach the topic
            self.history.ops.append(Op("ack-topic", self.app.name, message_id, None))
            with contextlib.suppress(KafkaError, OSError, asyncio.TimeoutError):
                async with asyncio.timeout(3):
                    await producer.send_and_wait(self.ack_topic, value, headers=signed)
            return
        headers = {"Authorization": f"Bearer {self.app.key}"}
        op = Op("ack", self.app.name, message_id, None)
        try:
            response = await self.stack.http.post(
                f"{self.stack.api}/v1/messages/{message_id}/ack", headers=headers,
                timeout=REQUEST_TIMEOUT)
        except httpx.HTTPError:
            self.history.ops.append(op)
            return
        self.history.ops.append(_answered(op, response))


@dataclass
class Consumers:
    """The scenario's consumer apps, each its own reader; started, stopped and restarted
    together."""

    members: list[Consumer]
    STOP_SECONDS: ClassVar[float] = Consumer.STOP_SECONDS

    @classmethod
    def of(cls, stack: Stack, apps: Apps, history: History, rng: random.Random,
           ack_topic: str) -> Consumers:
        return cls([Consumer(stack, app, history, random.Random(rng.random()), ack_topic)
                    for app in apps.consumers])

    def start(self) -> None:
        for member in self.members:
            member.start()

    async def stop(self) -> None:
        """Every reader and its acks ended; a reader that had failed raises its error."""
        results = await asyncio.gather(*(m.stop() for m in self.members), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def restart(self) -> None:
        """New readers from the beginning (after the broker came back empty)."""
        await asyncio.gather(*(m.restart() for m in self.members))
