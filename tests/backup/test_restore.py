"""A restore from backup, drilled as the operations guide describes it: RMS on a PostgreSQL
with WAL archiving, a base backup (``pg_basebackup``), load, a named restore point, more load
(acks, new prepares, an app created), then the primary lost and a point-in-time restore into
a new server, ``rms migrate`` and RMS started on it. Each test checks one consequence the
guide lists; the drill runs once for the module."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from rms.devstack.embedded import EmbeddedPostgres, free_port
from rms.devstack.kafka_broker import EmbeddedKafka
from rms.store.migrate import upgrade
from rms_client.consumer import AckResult, HttpAcker, Outcome, RmsConsumer, RmsRecord, ensure_inbox
from tests.backup.pitr import ArchivingServer, restore
from tests.faults.cluster import SETTINGS, STOP_SECONDS, THIS_RELEASE, RmsProcess
from tests.faults.upgrade import migrate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ADMIN = "restore-admin-token"
POINT = "before-the-incident"
# a message unacknowledged this long is re-published; none is checked back while the drill
# runs (nothing listens at the check-back address)
POLICY = {"ack_timeout_seconds": 3, "check_after_seconds": 600,
          "check_url": "http://127.0.0.1:1/check"}
MESSAGES = 5
WAIT_SECONDS = 60.0


@dataclass
class Drill:
    """What the drill saw on the restored RMS."""

    acked_before: list[str]  # acknowledged before the restore point
    acked_after: list[str]  # published before the point, acknowledged after it
    confirmed_after: list[str]  # prepared before the point, confirmed (and acked) after it
    published_after: list[str]  # prepared and confirmed after the point, not yet read
    prepared_after: list[str]
    late_app: str
    producer_key: str  # the apps' keys, issued before the restore point
    reader_key: str
    late_key: str
    rotated_key: str  # the producer's key rotated after the point
    states: dict[str, str] = field(default_factory=dict)  # GET on the restored RMS, first
    confirm_after: dict[str, int] = field(default_factory=dict)  # status of each confirm
    reconfirmed: dict[str, int] = field(default_factory=dict)  # confirmed_after, again
    acks: Counter[str] = field(default_factory=Counter)  # "<id> <result> <status>"
    get_after: dict[str, int] = field(default_factory=dict)
    late_key_status: int = 0  # a request with the late app's key
    rotated_key_status: int = 0  # a request with the key rotated after the point
    apps: list[str] = field(default_factory=list)  # the restored RMS's apps
    redelivered: Counter[str] = field(default_factory=Counter)  # outcome of each record read
    handled: Counter[str] = field(default_factory=Counter)  # the handler's effects per id
    final: dict[str, str] = field(default_factory=dict)  # states once the consumer acked
    recovery_seconds: float = 0.0  # the primary lost -> the restored RMS answers
    postgres_seconds: float = 0.0  # of which: the restore, replay and promotion


@dataclass
class Rms:
    """Real ``rms serve``, ``confirm-worker`` and ``recovery-worker`` processes on one
    database, and an HTTP client for them."""

    base: Path
    env: dict[str, str]
    http: httpx.AsyncClient
    port: int = field(default_factory=free_port)
    processes: list[RmsProcess] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, *kinds: str) -> None:
        for kind in kinds:
            args = ["serve", "--port", str(self.port)] if kind == "serve" else [kind]
            process = RmsProcess(kind, args, self.env, self.base / f"{kind}.log",
                                 self.port if kind == "serve" else None, THIS_RELEASE)
            process.start()
            self.processes.append(process)
            await process.wait_ready(self.http)

    async def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            await process.stop(time.monotonic() + STOP_SECONDS)
        self.processes.clear()

    async def call(self, method: str, path: str, key: str, **body: Any) -> httpx.Response:
        return await self.http.request(method, self.url + path, json=body or None,
                                       headers={"Authorization": f"Bearer {key}"})

    async def create_app(self, name: str, produce: str, consume: str) -> str:
        response = await self.call("POST", "/v1/admin/apps", ADMIN, name=name,
                                   produce_topics=[produce], consume_topics=[consume],
                                   check_url_prefixes=["http://127.0.0.1:1/"])
        assert response.status_code == 201, response.text
        return str(response.json()["api_key"])

    async def send(self, key: str, topic: str, n: int, confirm: bool = True) -> list[str]:
        ids = []
        for i in range(n):
            response = await self.call("POST", "/v1/messages", key, topic=topic,
                                       payload={"n": i}, **POLICY)
            assert response.status_code == 201, response.text
            ids.append(str(response.json()["message_id"]))
            if confirm:
                confirmed = await self.call("POST", f"/v1/messages/{ids[-1]}/confirm", key)
                assert confirmed.status_code == 200, confirmed.text
        return ids

    async def states(self, key: str, ids: list[str]) -> dict[str, str]:
        found = {}
        for message_id in ids:
            response = await self.call("GET", f"/v1/messages/{message_id}", key)
            found[message_id] = response.json().get("state") if response.is_success else \
                str(response.status_code)
        return found

    async def wait_for(self, key: str, ids: list[str], state: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while set((await self.states(key, ids)).values()) != {state}:
            assert time.monotonic() < deadline, (state, await self.states(key, ids))
            await asyncio.sleep(0.2)


class Consumer:
    """The consumer app, as the SDK runs it: an inbox in its own database (not the one
    restored), a handler whose effect is one row per message, acks over HTTP."""

    def __init__(self, inbox_url: str, bootstrap: str, group: str) -> None:
        self.engine = create_async_engine(inbox_url)
        self.bootstrap = bootstrap
        self.group = group
        self.outcomes: Counter[str] = Counter()  # "<message id> <outcome>"
        self.acks: Counter[str] = Counter()  # "<message id> <result> <status>"

    async def prepare(self) -> None:
        await ensure_inbox(self.engine)
        async with self.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE IF NOT EXISTS effects (message_id text)"))

    async def handler(self, conn: AsyncConnection, message: RmsRecord) -> None:
        await conn.execute(text("INSERT INTO effects VALUES (:m)"), {"m": message.message_id})

    async def until(self, rms: Rms, key: str, topic: str,
                    *wanted: tuple[list[str], Outcome]) -> None:
        """Consume until each id of each ``(ids, outcome)`` was handled with that outcome
        (and its ack answered)."""
        consumer = RmsConsumer(engine=self.engine, handler=self.handler, group_id=self.group,
                               acker=HttpAcker(rms.url, key), bootstrap_servers=self.bootstrap,
                               topics=[topic])
        deadline = time.monotonic() + WAIT_SECONDS
        async with consumer:
            while not all(self.outcomes[f"{i} {o}"] for ids, o in wanted for i in ids):
                assert time.monotonic() < deadline, (wanted, self.outcomes)
                report = await consumer.run_once()
                self.outcomes.update(f"{i} {o}" for i, o in report.outcomes)
                self.acks.update(f"{a.message_id} {a.result} {a.status}" for a in report.acks)
                assert not any(a.result is AckResult.FAILED for a in report.acks), report.acks

    async def effects(self) -> Counter[str]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(text("SELECT message_id FROM effects"))).all()
        return Counter(str(row[0]) for row in rows)


def _env(database_url: str, bootstrap: str, tag: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    return env | SETTINGS | {"RMS_DATABASE_URL": database_url, "RMS_ADMIN_TOKEN": ADMIN,
                             "RMS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                             "RMS_ACK_TOPIC": f"rms.acks.restore-{tag}",
                             "RMS_ACK_CONSUMER_GROUP": f"rms-acks-restore-{tag}"}


async def _drill(base: Path, bootstrap: str, inbox_url: str) -> Drill:
    tag = uuid.uuid4().hex[:8]
    topic = f"points-{tag}.earned"
    primary = ArchivingServer(base)
    await asyncio.to_thread(primary.start)
    primary.server.create_database("rms")
    await asyncio.to_thread(upgrade, primary.server.url("rms"))
    backup = await asyncio.to_thread(primary.base_backup, base / "backups" / "base")
    consumer = Consumer(inbox_url, bootstrap, f"points-{tag}")
    await consumer.prepare()
    async with httpx.AsyncClient(timeout=10) as http:
        rms = Rms(base / "rms-primary", _env(primary.server.url("rms"), bootstrap, tag), http)
        rms.base.mkdir()
        try:
            drill = await _before_and_after(rms, primary, consumer, topic, tag)
        finally:
            await rms.stop()
        primary.server.stop("immediate")  # the incident: the primary is lost
        lost = time.monotonic()
        restored = await asyncio.to_thread(restore, backup, primary.archive, base / "restored",
                                           POINT)
        drill.postgres_seconds = time.monotonic() - lost
        rms = Rms(base / "rms-restored", _env(restored.url("rms"), bootstrap, tag), http)
        rms.base.mkdir()
        try:
            await migrate(THIS_RELEASE, rms.env)
            await rms.start("serve")
            drill.recovery_seconds = time.monotonic() - lost
            await _observe(rms, drill, consumer, topic)
        finally:
            await rms.stop()
            restored.stop("immediate")
            await consumer.engine.dispose()
    return drill


async def _before_and_after(rms: Rms, primary: ArchivingServer, consumer: Consumer,
                            topic: str, tag: str) -> Drill:
    await rms.start("serve", "confirm-worker", "recovery-worker")
    producer = await rms.create_app(f"points-{tag}", f"points-{tag}.*", "none")
    reader = await rms.create_app(f"ledger-{tag}", "none", f"points-{tag}.*")
    acked_before = await rms.send(producer, topic, MESSAGES)
    await consumer.until(rms, reader, topic, (acked_before, Outcome.PROCESSED))
    await rms.wait_for(producer, acked_before, "done")
    acked_after = await rms.send(producer, topic, MESSAGES)
    await rms.wait_for(producer, acked_after, "sent")  # published, not yet acknowledged
    confirmed_after = await rms.send(producer, topic, MESSAGES, confirm=False)
    primary.restore_point(POINT)
    for message_id in confirmed_after:
        confirmed = await rms.call("POST", f"/v1/messages/{message_id}/confirm", producer)
        assert confirmed.status_code == 200, confirmed.text
    await consumer.until(rms, reader, topic, (acked_after + confirmed_after, Outcome.PROCESSED))
    await rms.wait_for(producer, acked_after + confirmed_after, "done")
    published_after = await rms.send(producer, topic, MESSAGES)
    await rms.wait_for(producer, published_after, "sent")  # in Kafka, not read before the loss
    prepared_after = await rms.send(producer, topic, MESSAGES, confirm=False)
    late = await rms.create_app(f"late-{tag}", "none", "none")
    rotated = await rms.call("POST", f"/v1/admin/apps/points-{tag}/rotate-key", ADMIN)
    assert rotated.status_code == 200, rotated.text
    await asyncio.to_thread(primary.archive_now)
    return Drill(acked_before, acked_after, confirmed_after, published_after, prepared_after,
                 f"late-{tag}", producer, reader, late, str(rotated.json()["api_key"]))


async def _observe(rms: Rms, drill: Drill, consumer: Consumer, topic: str) -> None:
    """Before the workers start, then with them: what the restored RMS answers."""
    producer, reader = drill.producer_key, drill.reader_key
    drill.states = await rms.states(producer, drill.acked_before + drill.acked_after
                                    + drill.confirmed_after + drill.published_after)
    for message_id in drill.confirmed_after:
        drill.reconfirmed[message_id] = (await rms.call(
            "POST", f"/v1/messages/{message_id}/confirm", producer)).status_code
    for message_id in drill.prepared_after:
        drill.get_after[message_id] = (await rms.call(
            "GET", f"/v1/messages/{message_id}", producer)).status_code
        drill.confirm_after[message_id] = (await rms.call(
            "POST", f"/v1/messages/{message_id}/confirm", producer)).status_code
    apps = (await rms.call("GET", "/v1/admin/apps", ADMIN)).json()
    drill.apps = [str(app["name"]) for app in apps["apps"]]
    drill.late_key_status = (await rms.call("GET", f"/v1/messages/{drill.prepared_after[0]}",
                                            drill.late_key)).status_code
    drill.rotated_key_status = (await rms.call(
        "GET", f"/v1/messages/{drill.acked_before[0]}", drill.rotated_key)).status_code
    await rms.start("confirm-worker", "recovery-worker")
    consumer.outcomes.clear()  # what the consumer reads from the restored RMS on
    consumer.acks.clear()
    settled = drill.acked_after + drill.confirmed_after
    await consumer.until(rms, reader, topic, (settled, Outcome.DUPLICATE),
                         (drill.published_after, Outcome.PROCESSED))
    await rms.wait_for(producer, settled, "done")
    drill.redelivered = consumer.outcomes
    drill.acks = consumer.acks
    drill.handled = await consumer.effects()
    drill.final = await rms.states(producer, drill.acked_before + settled)


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedKafka,
          postgres: EmbeddedPostgres) -> Drill:
    inbox = f"inbox_{uuid.uuid4().hex[:12]}"
    postgres.create_database(inbox)  # the consumer's own database: not restored
    done = asyncio.run(_drill(tmp_path_factory.mktemp("restore"), kafka.bootstrap_servers,
                              postgres.url(inbox)))
    print(f"restore drill: PostgreSQL restored and promoted {done.postgres_seconds:.1f}s, RMS "
          f"answering {done.recovery_seconds:.1f}s after the primary was lost")
    return done


def test_messages_acknowledged_before_the_point_stay_done(drill: Drill) -> None:
    assert {drill.states[i] for i in drill.acked_before} == {"done"}, drill.states
    assert {drill.final[i] for i in drill.acked_before} == {"done"}, drill.final
    assert not any(drill.redelivered[f"{i} {Outcome.DUPLICATE}"] for i in drill.acked_before)


def test_messages_acknowledged_after_the_point_are_sent_again_and_republished(
        drill: Drill) -> None:
    assert {drill.states[i] for i in drill.acked_after} == {"sent"}, drill.states
    assert all(drill.redelivered[f"{i} {Outcome.DUPLICATE}"] for i in drill.acked_after), \
        drill.redelivered
    assert {drill.final[i] for i in drill.acked_after} == {"done"}, drill.final


def test_messages_confirmed_after_the_point_are_pending_send_again_until_confirmed_again(
        drill: Drill) -> None:
    assert {drill.states[i] for i in drill.confirmed_after} == {"pending-send"}, drill.states
    assert set(drill.reconfirmed.values()) == {200}, drill.reconfirmed
    assert all(drill.redelivered[f"{i} {Outcome.DUPLICATE}"] for i in drill.confirmed_after)
    assert {drill.final[i] for i in drill.confirmed_after} == {"done"}, drill.final


def test_records_published_after_the_point_still_reach_consumers_whose_acks_answer_404(
        drill: Drill) -> None:
    """Kafka is not rolled back: what was published after the point is read after the
    restore, of messages RMS no longer knows."""
    assert {drill.states[i] for i in drill.published_after} == {"404"}, drill.states
    assert all(drill.redelivered[f"{i} {Outcome.PROCESSED}"] for i in drill.published_after)
    assert all(drill.acks[f"{i} {AckResult.REFUSED} 404"] for i in drill.published_after), \
        drill.acks


def test_the_consumers_inbox_keeps_each_effect_once(drill: Drill) -> None:
    every = (drill.acked_before + drill.acked_after + drill.confirmed_after
             + drill.published_after)
    assert {drill.handled[i] for i in every} == {1}, drill.handled
    assert set(drill.handled) == set(every), drill.handled


def test_messages_prepared_after_the_point_answer_404_to_their_producers(drill: Drill) -> None:
    assert set(drill.get_after.values()) == {404}, drill.get_after
    assert set(drill.confirm_after.values()) == {404}, drill.confirm_after


def test_apps_created_after_the_point_are_gone(drill: Drill) -> None:
    assert drill.late_app not in drill.apps, drill.apps
    assert drill.late_key_status == 401, drill.late_key_status
    assert any(name.startswith("points-") for name in drill.apps), drill.apps


def test_keys_rotated_after_the_point_are_back_to_the_previous_key(drill: Drill) -> None:
    assert drill.rotated_key_status == 401, drill.rotated_key_status
    assert "401" not in drill.states.values(), drill.states  # the previous key answers


def test_the_restore_is_timed(drill: Drill) -> None:
    assert 0 < drill.postgres_seconds <= drill.recovery_seconds < 180, drill
