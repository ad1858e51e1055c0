"""The restore drill's actors: real RMS processes on one database, and the consumer app as
the SDK runs it."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from rms.devstack.embedded import free_port
from rms_client.consumer import AckResult, HttpAcker, Outcome, RmsConsumer, RmsRecord, ensure_inbox
from tests.system.faults.cluster import SETTINGS, STOP_SECONDS, THIS_RELEASE, RmsProcess

ADMIN = "restore-admin-token"
# a message unacknowledged this long is re-published; none is checked back while the drill
# runs (nothing listens at the check-back address)
POLICY = {"ack_timeout_seconds": 3, "check_after_seconds": 600,
          "check_url": "http://127.0.0.1:1/check"}
WAIT_SECONDS = 60.0


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

    def __init__(self, app: str, inbox_url: str, bootstrap: str, group: str) -> None:
        self.app = app
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
        consumer = RmsConsumer(app=self.app, engine=self.engine, handler=self.handler,
                               group_id=self.group, acker=HttpAcker(rms.url, key),
                               bootstrap_servers=self.bootstrap, topics=[topic])
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


def env(database_url: str, bootstrap: str, tag: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    return inherited | SETTINGS | {"RMS_DATABASE_URL": database_url, "RMS_ADMIN_TOKEN": ADMIN,
                             "RMS_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                             "RMS_ACK_TOPIC": f"rms.acks.restore-{tag}",
                             "RMS_ACK_CONSUMER_GROUP": f"rms-acks-restore-{tag}"}
