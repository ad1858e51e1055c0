"""The restore drill, as the operations guide describes a restore: RMS on a PostgreSQL with WAL
archiving, a base backup, load, a named restore point, more load, the primary lost, a
point-in-time restore into a new server, ``rms migrate`` and RMS on it; what the restored
RMS answers is recorded in a :class:`Drill` for the tests to judge."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from rms.store.migrate import upgrade
from rms_client.consumer import Outcome
from tests.system.backup.actors import ADMIN, Consumer, Rms, env
from tests.system.backup.pitr import ArchivingServer, restore
from tests.system.faults.cluster import THIS_RELEASE
from tests.system.faults.upgrade import migrate

POINT = "before-the-incident"
MESSAGES = 5


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



async def run_drill(base: Path, bootstrap: str, inbox_url: str) -> Drill:
    tag = uuid.uuid4().hex[:8]
    topic = f"points-{tag}.earned"
    primary = ArchivingServer(base)
    await asyncio.to_thread(primary.start)
    primary.server.create_database("rms")
    await asyncio.to_thread(upgrade, primary.server.url("rms"))
    backup = await asyncio.to_thread(primary.base_backup, base / "backups" / "base")
    consumer = Consumer(f"ledger-{tag}", inbox_url, bootstrap, f"points-{tag}")
    await consumer.prepare()
    async with httpx.AsyncClient(timeout=10) as http:
        rms = Rms(base / "rms-primary", env(primary.server.url("rms"), bootstrap, tag), http)
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
        rms = Rms(base / "rms-restored", env(restored.url("rms"), bootstrap, tag), http)
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
