"""Full disks, each on a size-limited tmpfs filled to the last byte under load.

PostgreSQL's data directory: writes are refused with a clear 503 problem document
(``database-full``, with ``Retry-After``), never a 500 and never a hang; nothing refused is
half-written; once space is freed, RMS resumes by itself (no process restarted) and loses
nothing. Kafka's log directory: the broker stops; confirmed messages stay ``sent``,
``publish_blocked`` names the reason, and they are delivered once the broker is back."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from tests.system.deploy.tools import checker_missing
from tests.system.faults.cluster import ADMIN_TOKEN, Infra, Stack, running_stack
from tests.system.faults.disk import cannot_mount
from tests.system.faults.faults import FillKafkaDisk, FillPostgresDisk
from tests.system.faults.scenario import Scenario, run
from tests.system.faults.test_scenarios import assert_clean
from tests.system.monitoring.prometheus import Prometheus, scraping

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.usefixtures("tasks_dumped_before_the_timeout")]

PG_DISK_MB = 256
KAFKA_DISK_MB = 256
BLOCKED_WITHIN = 30.0
DELIVERED_WITHIN = 90.0
REQUEST_SECONDS = 10.0  # a refused write answers at once; waiting longer would be a hang
REFUSED_WITHIN = 60.0  # seconds of prepares on a full disk before one needs a new page
RESUMED_WITHIN = 30.0


@pytest.fixture(scope="module")
def disk_full_infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    mountable()
    own = Infra(tmp_path_factory.mktemp("faults-disk"), brokers=1, pg_disk_mb=PG_DISK_MB)
    try:
        own.start()
        yield own
    finally:
        own.stop()  # unmounts, also after a failed start


def mountable() -> None:
    reason = cannot_mount()
    if reason is not None:
        checker_missing(f"the full-disk scenarios cannot run: {reason}")


@pytest.fixture(scope="module")
def kafka_disk_infra(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Infra]:
    mountable()
    own = Infra(tmp_path_factory.mktemp("faults-kafka-disk"), brokers=1,
                kafka_disk_mb=KAFKA_DISK_MB)
    try:
        own.start()
        yield own
    finally:
        own.stop()


@pytest.fixture
async def kafka_disk_stack(kafka_disk_infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(kafka_disk_infra, metrics=True) as running:
        yield running


@pytest.fixture
async def disk_stack(disk_full_infra: Infra) -> AsyncIterator[Stack]:
    async with running_stack(disk_full_infra) as running:
        yield running


class Producer:
    def __init__(self, stack: Stack, app: str, key: str) -> None:
        self.stack, self.topic = stack, f"{app}.events"
        self.headers = {"Authorization": f"Bearer {key}"}

    async def prepare(self, message_id: str) -> httpx.Response:
        return await self.stack.http.post(
            f"{self.stack.api}/v1/messages", headers=self.headers, timeout=REQUEST_SECONDS,
            json={"message_id": message_id, "topic": self.topic, "payload": {"id": message_id},
                  "check_url": self.stack.check_url})

    async def send(self, message_id: str) -> httpx.Response:
        return await self.stack.http.post(
            f"{self.stack.api}/v1/messages/send", headers=self.headers, timeout=REQUEST_SECONDS,
            json={"message_id": message_id, "topic": self.topic, "payload": {"id": message_id},
                  "check_url": self.stack.check_url})

    async def confirm(self, message_id: str) -> httpx.Response:
        return await self.stack.http.post(
            f"{self.stack.api}/v1/messages/{message_id}/confirm", headers=self.headers,
            timeout=REQUEST_SECONDS)


async def prepare_until_refused(producer: Producer, answered: dict[str, int]) -> httpx.Response:
    """Prepares on the full disk until one is refused (the first that needs a new page)."""
    deadline = time.monotonic() + REFUSED_WITHIN
    while time.monotonic() < deadline:
        message_id = f"full-{uuid.uuid4().hex[:10]}"
        response = await producer.prepare(message_id)
        answered[message_id] = response.status_code
        assert response.status_code in {201, 503}, response.text
        if response.status_code == 503:
            return response
    raise AssertionError(f"no prepare refused in {REFUSED_WITHIN} s on a full disk")


async def create_apps_until_refused(stack: Stack) -> httpx.Response:
    """Apps created on the full disk until one is refused (an admin write through SQLAlchemy,
    where the prepares above go through the driver's coalesced statements)."""
    deadline = time.monotonic() + REFUSED_WITHIN
    while time.monotonic() < deadline:
        response = await stack.http.post(
            f"{stack.api}/v1/admin/apps", timeout=REQUEST_SECONDS,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            json={"name": f"full-{uuid.uuid4().hex[:10]}", "produce_topics": ["full.*"],
                  "consume_topics": ["none"], "check_url_prefixes": []})
        assert response.status_code in {201, 503}, response.text
        if response.status_code == 503:
            return response
    raise AssertionError(f"no app creation refused in {REFUSED_WITHIN} s on a full disk")


def assert_database_full(refused: httpx.Response) -> None:
    problem = refused.json()
    assert problem["type"] == "https://rms.dev/problems/database-full", problem
    assert problem["status"] == 503 and refused.headers["Retry-After"] == "30", problem
    assert refused.headers["content-type"] == "application/problem+json"


async def seconds_until_prepared(producer: Producer) -> float:
    started = time.monotonic()
    while True:
        response = await producer.prepare(f"after-{uuid.uuid4().hex[:10]}")
        if response.status_code == 201:
            return time.monotonic() - started
        assert response.status_code == 503, response.text
        assert time.monotonic() - started < RESUMED_WITHIN, response.text


async def test_postgres_disk_full_refuses_writes_with_503_and_resumes(disk_stack: Stack) -> None:
    stack = disk_stack
    disk = stack.infra.pg_disk
    assert disk is not None
    apps = await stack.create_apps(uuid.uuid4().hex[:8])
    app, key = next(iter(apps.producers.items()))
    producer = Producer(stack, app, key)
    assert (await producer.prepare("before-full")).status_code == 201
    postmaster = (stack.infra.postgres.data_dir / "postmaster.pid").read_text()

    filled = disk.fill()
    answered: dict[str, int] = {}
    try:
        refused = await prepare_until_refused(producer, answered)
        confirm = await producer.confirm("before-full")
        assert confirm.status_code in {200, 503}, confirm.text
        app_refused = await create_apps_until_refused(stack)
    finally:
        disk.free()
        freed_at = time.monotonic()
    assert_database_full(refused)
    assert_database_full(app_refused)
    resumed = await seconds_until_prepared(producer) + (time.monotonic() - freed_at)

    # nothing refused was half-written; everything answered 201 is there
    ids = list(answered)
    rows = {r[0] for r in await stack.rows("SELECT message_id FROM messages WHERE "
                                           "message_id = ANY(:ids)", ids=ids)}
    events = {r[0] for r in await stack.rows("SELECT message_id FROM message_events WHERE "
                                             "message_id = ANY(:ids)", ids=ids)}
    refused_ids = {m for m, status in answered.items() if status == 503}
    assert rows == events == set(ids) - refused_ids
    # RMS was not restarted, and neither was PostgreSQL
    assert [p.starts for p in stack.processes] == [1] * len(stack.processes)
    assert (stack.infra.postgres.data_dir / "postmaster.pid").read_text() == postmaster
    for message_id in refused_ids:  # the producer's retry with the same id succeeds
        assert (await producer.prepare(message_id)).status_code == 201
    assert (await producer.confirm("before-full")).status_code == 200
    print(f"filled {filled / 2**20:.1f} MiB; {len(answered) - len(refused_ids)} prepares "
          f"accepted, then 503 database-full; first prepare accepted {resumed:.2f} s after "
          f"the space was freed")


async def test_postgres_disk_full_under_load_loses_nothing(disk_stack: Stack) -> None:
    report = await run(disk_stack, Scenario("pg-disk-full", [FillPostgresDisk()], seconds=14.0,
                                            gap=(2.0, 3.0)), seed=14)
    assert_clean(report, "pg-disk-full")


async def blocked_reasons(stack: Stack, topic: str) -> set[str]:
    stats = await stack.http.get(f"{stack.api}/v1/admin/stats", timeout=REQUEST_SECONDS,
                                 headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert stats.status_code == 200, stats.text
    return {b["reason"] for b in stats.json()["publish_blocked"] if b["topic"] == topic}


async def states(stack: Stack, ids: list[str]) -> dict[str, tuple[str, bool, int]]:
    rows = await stack.rows("SELECT message_id, state, dead, (SELECT count(*) FROM "
                            "message_events e WHERE e.message_id = m.message_id AND "
                            "e.event = 'published') FROM messages m WHERE message_id = ANY(:ids)",
                            ids=ids)
    return {r[0]: (r[1], r[2], int(r[3])) for r in rows}


async def wait_for(what: str, bound: float, check: Callable[[], Awaitable[bool]]) -> float:
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < bound, f"{what} not within {bound} s"
        await asyncio.sleep(0.2)
    return time.monotonic() - started


async def test_kafka_disk_full_keeps_messages_sent_and_delivers_them_after(
        kafka_disk_stack: Stack) -> None:
    stack = kafka_disk_stack
    apps = await stack.create_apps(uuid.uuid4().hex[:8])
    app, key = next(iter(apps.producers.items()))
    producer = Producer(stack, app, key)
    assert (await producer.send("before-kafka-full")).status_code == 201

    with scraping(stack) as watching:
        await asyncio.sleep(3)  # a few scrapes before the fault
        await kafka_disk_full_drill(stack, producer, watching)


async def kafka_disk_full_drill(stack: Stack, producer: Producer, watching: Prometheus) -> None:
    infra = stack.infra
    disk = infra.kafka_disk
    assert disk is not None
    filled = disk.fill()
    try:
        ids: list[str] = []
        reasons: set[str] = set()

        async def blocked() -> bool:
            """One more message sent (stored at once; its publish waits or fails): the last
            page of the broker's active segment still takes a few records after the fill."""
            ids.append(f"kfull-{len(ids)}-{uuid.uuid4().hex[:6]}")
            response = await producer.send(ids[-1])
            assert response.status_code == 201, response.text
            reasons.update(await blocked_reasons(stack, producer.topic))
            return bool(reasons)

        blocked_after = await wait_for("publish_blocked naming the topic", BLOCKED_WITHIN,
                                       blocked)
        during = await states(stack, ids)
        assert {state for state, _, _ in during.values()} == {"sent"}, during
        assert not any(dead for _, dead, _ in during.values()), during
        assert any(published == 0 for _, _, published in during.values()), during
        broker_stopped = not infra.kafka.nodes[0].running()
        alerted_after = await watching.wait_firing(stack.http, "RMSPublishFailures")
    finally:
        freed_at = time.monotonic()
        restarted = await asyncio.to_thread(infra.heal_kafka)  # frees the disk first

    async def delivered() -> bool:
        return all(published >= 1 for _, _, published in (await states(stack, ids)).values())

    await wait_for("every held message published", DELIVERED_WITHIN, delivered)
    delivered_after = time.monotonic() - freed_at
    assert await read_ids(infra.bootstrap_servers, producer.topic, set(ids))
    print(f"kafka log dir filled ({filled / 2**20:.1f} MiB); {len(ids)} sent after the fill; "
          f"broker stopped: {broker_stopped}, "
          f"restarted: {restarted}; publish_blocked {sorted(reasons)} after "
          f"{blocked_after:.1f} s, RMSPublishFailures firing {alerted_after:.1f} s later (for: "
          f"2s); every held message published {delivered_after:.1f} s after the space was freed")


async def read_ids(servers: str, topic: str, wanted: set[str]) -> bool:
    """Every ``wanted`` message id read from ``topic`` (its ``rms-message-id`` header)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=servers, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + DELIVERED_WITHIN
        while not wanted <= seen and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000)
            for records in batches.values():
                for record in records:
                    headers = dict(record.headers or [])
                    seen.add(headers.get("rms-message-id", b"").decode())
    finally:
        await consumer.stop()
    return wanted <= seen


async def test_kafka_disk_full_under_load_loses_nothing(kafka_disk_stack: Stack) -> None:
    report = await run(kafka_disk_stack, Scenario("kafka-disk-full", [FillKafkaDisk()],
                                                  seconds=14.0, gap=(2.0, 3.0)), seed=15)
    assert_clean(report, "kafka-disk-full")
