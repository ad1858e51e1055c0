"""Run by the virtual environment that holds only the ``rms-client`` distribution, against a
live RMS: how long a consumer process killed (SIGKILL: it cannot leave its group) and started
again waits before it handles the next message, once as a dynamic member of its group and
once as a static member (``instance_id=``, Kafka's ``group.instance.id``). Prints both gaps
and exits 0 when the static member's is under STATIC_BOUND seconds; imports nothing of the
server.

``python live_restart.py member <app> <api key> <group> <instance id or ->`` is one consumer
process: it prints ``joining <monotonic time>`` as it starts its consumer, then ``handled
<message id> <monotonic time>`` for each record it handles."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from rms_client import HttpAcker, RmsConsumer, RmsProducer, RmsRecord, ensure_inbox

RMS = os.environ["RMS_URL"]
PREFIX = f"{os.environ['RMS_TEST_PREFIX']}-{os.getpid()}"
TOPIC = os.environ.get("RESTART_TOPIC", f"restarted.{PREFIX}")  # a member's: its parent's
BOOTSTRAP = os.environ["RMS_KAFKA_BOOTSTRAP_SERVERS"]
DATABASE = os.environ["RMS_TEST_DATABASE_URL"].replace("postgresql://", "postgresql+asyncpg://", 1)
STATIC_BOUND = 8.0  # a static member's restart: its process start and one rejoin, no rebalance
WAIT = 90.0


async def member(app: str, key: str, group: str, instance: str) -> None:
    engine = create_async_engine(DATABASE)
    table = f"{group.replace('-', '_')}_inbox"
    await ensure_inbox(engine, table)

    async def handle(conn: AsyncConnection, record: RmsRecord) -> None:
        print(f"handled {record.message_id} {time.monotonic():.3f}", flush=True)

    print(f"joining {time.monotonic():.3f}", flush=True)
    async with RmsConsumer(app=app, engine=engine, handler=handle, acker=HttpAcker(RMS, key),
                           bootstrap_servers=BOOTSTRAP, topics=[TOPIC], inbox_table=table,
                           instance_id=None if instance == "-" else instance) as consumer:
        await consumer.run()


class Member:
    """One consumer process and the ids it handled, read from its output."""

    def __init__(self, app: dict[str, Any], instance: str) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "member", app["name"], app["api_key"], app["name"],
             instance], stdout=subprocess.PIPE, text=True, env=os.environ | {
                 "RESTART_TOPIC": TOPIC})
        self.handled: dict[str, float] = {}
        self.joining = 0.0  # when the process, imports and inbox done, starts its consumer

    async def until_handled(self, message_id: str) -> float:
        """The monotonic time the process handled ``message_id``."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + WAIT
        while message_id not in self.handled:
            assert time.monotonic() < deadline, f"{message_id} not handled within {WAIT:g}s"
            line = await asyncio.to_thread(self.process.stdout.readline)
            assert line, f"the consumer process exited ({self.process.poll()})"
            if line.startswith("handled "):
                _, handled, at = line.split()
                self.handled[handled] = float(at)
            elif line.startswith("joining "):
                self.joining = float(line.split()[1])
        return self.handled[message_id]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


async def gap(http: httpx.AsyncClient, producer: RmsProducer, static: bool
              ) -> tuple[float, float]:
    """Seconds from a restarted process's start to its handling of a message sent then, and
    the part of them from its consumer's start (the process's imports and inbox excluded)."""
    kind = "static" if static else "dynamic"
    admin = {"Authorization": f"Bearer {os.environ['RMS_ADMIN_TOKEN']}"}
    created = await http.post("/v1/admin/apps", headers=admin, json={
        "name": f"{PREFIX}-restart-{kind}", "consume_topics": [TOPIC], "produce_topics": [],
        "check_url_prefixes": ["http://127.0.0.1:9/"]})
    created.raise_for_status()
    app = created.json()
    instance = f"{app['name']}-0" if static else "-"
    first = Member(app, instance)
    try:
        await first.until_handled((await producer.send(TOPIC, {"n": 1})).message_id)
    finally:
        first.kill()
    restarted = Member(app, instance)
    try:
        message_id = (await producer.send(TOPIC, {"n": 2})).message_id
        handled = await restarted.until_handled(message_id)
        return handled - restarted.started, handled - restarted.joining
    finally:
        restarted.kill()


async def main() -> None:
    async with httpx.AsyncClient(base_url=RMS, timeout=10) as http:
        admin = {"Authorization": f"Bearer {os.environ['RMS_ADMIN_TOKEN']}"}
        created = await http.post("/v1/admin/apps", headers=admin, json={
            "name": f"{PREFIX}-restart-shop", "consume_topics": [], "produce_topics": [TOPIC],
            "check_url_prefixes": ["http://127.0.0.1:9/"]})
        created.raise_for_status()
        producer = RmsProducer(RMS, created.json()["api_key"],
                               default_check_url="http://127.0.0.1:9/check")
        await _published(http, (await producer.send(TOPIC, {"n": 0})).message_id)
        dynamic = await gap(http, producer, static=False)
        static = await gap(http, producer, static=True)
        await producer.aclose()
    print(f"restart gap (process start to the next message handled; from the consumer's start "
          f"in brackets): dynamic {dynamic[0]:.1f} s ({dynamic[1]:.1f} s), static "
          f"{static[0]:.1f} s ({static[1]:.1f} s)")
    assert static[0] < STATIC_BOUND, f"a static member waited {static[0]:.1f} s for records"


async def _published(http: httpx.AsyncClient, message_id: str) -> None:
    """Wait until RMS published the message: its topic exists before any consumer joins."""
    admin = {"Authorization": f"Bearer {os.environ['RMS_ADMIN_TOKEN']}"}
    deadline = time.monotonic() + WAIT
    while (await http.get(f"/v1/admin/messages/{message_id}", headers=admin)
           ).json().get("delivery_count", 0) < 1:
        assert time.monotonic() < deadline, "RMS published nothing"
        await asyncio.sleep(0.1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["member"]:
        asyncio.run(member(*sys.argv[2:6]))
    else:
        asyncio.run(main())
