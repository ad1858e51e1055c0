"""The system under test, as an operator runs it: real ``rms serve``, ``rms confirm-worker`` and
``rms recovery-worker`` processes on the suite's own embedded PostgreSQL and Apache Kafka.

Kafka is a three-node KRaft cluster (every node a broker and a controller voter; topics with
replication factor 3 and ``min.insync.replicas`` 2, as deploy/ sets them), or a single broker
for the scenario in which the broker loses its whole log. RMS reaches PostgreSQL, the
producers' check-back endpoint and Kafka node 1 through :class:`~tests.system.faults.proxy.FaultProxy`
instances. For Kafka the proxy is transparent to metadata: node 1 listens on one port and
advertises the proxy's, so every Kafka client (RMS and the test's consumer) reaches node 1
only through the proxy, and nodes 2 and 3 directly. Brokers replicate over their own listener,
outside the proxy.

:class:`Infra` (PostgreSQL + broker) lives for a whole test module or soak run; :class:`Stack`
(proxies, callback server, RMS processes) is built per scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from rms.devstack.embedded import EmbeddedPostgres, free_port
from rms.devstack.kafka_broker import EmbeddedKafka, KafkaCluster
from rms.devstack.reaper import tied_to_parent
from rms.kafka.topics import create_topics
from rms.store.migrate import upgrade
from tests.integration.checkback.servers import CallbackServer, serving
from tests.system.faults.bounds import bounded
from tests.system.faults.disk import SizedDisk
from tests.system.faults.ha import PatroniCluster
from tests.system.faults.history import Claim, FinalMessage, StoredEvent
from tests.system.faults.proxy import FaultProxy

ADMIN_TOKEN = "faults-admin-token"
DATABASE = "rms"
HARNESS = "faults-harness"  # application_name of the suite's own connections
LEASE_SECONDS = 4.0
ORDERED_PARTITIONS = 4
START_SECONDS = 60.0
STOP_SECONDS = 10.0  # after SIGTERM, then SIGKILL
QUERY_SECONDS = 60.0  # one query of the harness's own (a failover's reconnect included)
CLOSE_SECONDS = 30.0  # a proxy or the harness's connection pool closed

THIS_RELEASE = (sys.executable, "-m", "rms.cli")  # how an RMS process of this tree starts

TRANSACTION_TIMEOUT_SECONDS = 4.0
# short timings so every scenario converges in seconds (docs/reference/configuration.md names them)
SETTINGS = {
    "RMS_WORKER_INTERVAL_SECONDS": "0.1",
    "RMS_PUBLISH_RETRY_SECONDS": "0.3",
    "RMS_KAFKA_PUBLISH_TIMEOUT_SECONDS": "1.5",
    # shorter than a broker's pause (PauseBroker): a Kafka transaction open on a stalled broker
    # outlives its time-out, and the broker aborts it
    "RMS_KAFKA_TRANSACTION_TIMEOUT_SECONDS": str(TRANSACTION_TIMEOUT_SECONDS),
    "RMS_WORKER_LEASE_SECONDS": str(LEASE_SECONDS),
    "RMS_CALLBACK_TIMEOUT_SECONDS": "2",
    "RMS_CHECK_BACKOFF_CAP_SECONDS": "1",
    "RMS_DELIVERY_BACKOFF_CAP_SECONDS": "2",
    "RMS_DB_POOL_SIZE": "5",
    "RMS_DB_MAX_OVERFLOW": "5",
    "RMS_DB_POOL_TIMEOUT_SECONDS": "3",
    "RMS_WORKER_CONCURRENCY": "16",
    "RMS_WORKER_BATCH_SIZE": "50",
    "RMS_ALLOW_PRIVATE_CALLBACKS": "true",
    "RMS_LOG_JSON": "true",
    "RMS_ACK_TOPIC": "rms.acks.faults",
    "RMS_ACK_CONSUMER_GROUP": "rms-acks-faults",
}


# a broker frozen (SIGSTOP) longer than this is fenced by the controller quorum
BROKER_SESSION_MS = 6000
CLUSTER_SETTINGS = {
    "broker.session.timeout.ms": str(BROKER_SESSION_MS),
    "broker.heartbeat.interval.ms": "1000",
    "replica.lag.time.max.ms": "5000",
}


@dataclass
class Infra:
    """The suite's own PostgreSQL (restarted and crashed by faults, so never the session's
    shared one) and Kafka (nodes killed, frozen and restarted by faults): ``brokers`` 3 for
    a cluster, 1 for a single broker that loses its log."""

    base: Path
    brokers: int = 3
    ha: PatroniCluster | None = None  # a PostgreSQL that fails over instead of ``postgres``
    migrate: bool = True  # False: an empty database, migrated by whoever runs on it first
    pg_disk_mb: int | None = None  # PostgreSQL's data directory on a tmpfs of this size
    kafka_disk_mb: int | None = None  # node 1's log directory on a tmpfs of this size
    postgres: EmbeddedPostgres = field(init=False)
    pg_disk: SizedDisk | None = field(init=False, default=None)
    kafka_disk: SizedDisk | None = field(init=False, default=None)
    kafka: KafkaCluster = field(init=False)

    def __post_init__(self) -> None:
        # fsync off: `pg_ctl stop -m immediate` kills PostgreSQL, not the kernel, so WAL written
        # at commit survives in the page cache exactly as it would with fsync on
        self.postgres = EmbeddedPostgres(self.base / "pg" / "data", fsync=False)
        self.kafka = (EmbeddedKafka(self.base / "kafka") if self.brokers == 1 else
                      KafkaCluster(self.base / "kafka", size=self.brokers,
                                   extra_settings=CLUSTER_SETTINGS))
        self.kafka.nodes[0].advertised_port = free_port()  # the fault proxy's
        if self.pg_disk_mb is not None:
            self.pg_disk = SizedDisk(self.postgres.data_dir, self.pg_disk_mb)
        if self.kafka_disk_mb is not None:
            self.kafka_disk = SizedDisk(self.kafka.nodes[0].log_dir, self.kafka_disk_mb)

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka.bootstrap_servers

    def database_url(self, database: str = DATABASE) -> str:
        """PostgreSQL, reached directly (not through the fault proxy); with a failover
        cluster, the multi-host URL that finds the writable member."""
        return self.ha.url(database) if self.ha else self.postgres.url(database)

    def rms_database_url(self, pg_proxy: FaultProxy) -> str:
        """What RMS connects to: through the fault proxy, or the failover cluster's URL."""
        if self.ha:
            return self.ha.url(DATABASE)
        return f"postgresql+asyncpg://postgres@{pg_proxy.address}/{DATABASE}"

    @property
    def pg_port(self) -> int:
        return self.ha.nodes[0].pg_port if self.ha else self.postgres.port

    @property
    def proxied_node_ports(self) -> tuple[int, int]:
        """(the proxy's port, node 1's own client port)."""
        node = self.kafka.nodes[0]
        assert node.advertised_port is not None
        return node.advertised_port, node.port

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        if self.ha:
            self.ha.start()
            self.ha.create_database(DATABASE)
        else:
            if self.pg_disk is not None:
                self.pg_disk.mount()
            self.postgres.start()
            self.postgres.create_database(DATABASE)
        if self.migrate:
            upgrade(self.database_url(DATABASE))
        if self.kafka_disk is not None:
            self.kafka_disk.mount()
        self.kafka.start()

    def stop(self) -> None:
        try:
            self.kafka.kill()
            if self.ha:
                self.ha.stop()
            else:
                self.postgres.stop("immediate")
        finally:
            for disk in (self.pg_disk, self.kafka_disk):
                if disk is not None:
                    disk.unmount()

    def heal_postgres(self) -> None:
        """PostgreSQL up: its disk freed, restarted after a crash, or every failover member
        running and a primary elected."""
        if self.pg_disk is not None:
            self.pg_disk.free()
        if self.ha:
            self.ha.heal()
        elif not (self.postgres.data_dir / "postmaster.pid").exists():
            self.postgres.start()

    def lose_broker_log(self) -> None:
        """The single broker back on its address with an empty log directory."""
        assert isinstance(self.kafka, EmbeddedKafka)
        self.kafka.restart_empty()

    def heal_kafka(self) -> bool:
        """Every node's disk freed, every node resumed and running; True when one had to be
        started again."""
        if self.kafka_disk is not None:
            self.kafka_disk.free()
        return bool(self.kafka.heal())


@dataclass
class RmsProcess:
    """One real ``rms`` process; restartable, killable and pausable."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    port: int | None = None  # rms serve only
    command: tuple[str, ...] = THIS_RELEASE  # the ``rms`` program, without its arguments
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        with self.log.open("ab") as sink:
            self.process = subprocess.Popen(  # gone with the harness, even if it is killed
                [*self.command, *self.args], env=self.env, stdout=sink,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=tied_to_parent())
        self.starts += 1

    def signal(self, signum: int) -> None:
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signum)

    def kill(self) -> None:
        if self.process is not None and self.alive:
            self.process.kill()
            self.process.wait(10)

    def terminate(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)

    async def stop(self, deadline: float) -> None:
        """After :meth:`terminate`: wait until ``deadline`` (monotonic), then SIGKILL. Waits
        without blocking the event loop: the proxies in it carry the shutdown's last writes."""
        for _ in range(int(max(0.0, deadline - time.monotonic()) / 0.05)):
            if not self.alive:
                return
            await asyncio.sleep(0.05)
        self.kill()

    async def wait_ready(self, http: httpx.AsyncClient, timeout: float = START_SECONDS) -> None:
        await bounded(self._wait_ready(http), timeout, f"{self.name} to be ready")

    async def _wait_ready(self, http: httpx.AsyncClient) -> None:
        while not await self._ready(http):
            if not self.alive:
                raise AssertionError(f"{self.name} exited:\n{self.log_tail()}")
            await asyncio.sleep(0.1)

    async def _ready(self, http: httpx.AsyncClient) -> bool:
        if self.port is None:
            return self.log.read_bytes().count(b'"worker.started"') >= self.starts
        with contextlib.suppress(httpx.HTTPError):
            response = await http.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
            return response.status_code == 200
        return False

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


@dataclass(frozen=True)
class ConsumerApp:
    """A consumer app of a scenario: the topics it reads and how the test consumer behaves as
    it (``crash_before_ack``: the share of first deliveries it reads and crashes before
    acking; ``acks`` False: it reads every record and never acks)."""

    name: str
    key: str
    secret: str  # signs its ack-topic records
    topics: tuple[str, ...]
    crash_before_ack: float
    acks: bool = True


# a scenario's consumer apps: name prefix -> (the suffix of the producers' topics it consumes,
# share of first deliveries it crashes on before acking, whether it acks at all). Two or three
# read every topic, so one consumer's ack must never finish the others' messages; ``audit``
# never acks, so each message of the ``.audit`` topics ends dead naming it, and only it.
CONSUMERS = {"points": ("*", 0.2, True), "invoices": ("*", 0.35, True),
             "audit": ("audit", 0.0, False)}


@dataclass
class Apps:
    """Two producer apps and their consumer apps of one scenario, with their API keys."""

    producers: dict[str, str]  # name -> api key
    consumers: list[ConsumerApp]

    def topic(self, app: str) -> str:
        return f"{app}.events"

    def ordered_topic(self, app: str) -> str:
        """In the app's ``ordered_topics``: keyed messages go in confirm order per key."""
        return f"{app}.ordered"

    def audit_topic(self, app: str) -> str:
        """Read by a consumer that never acks, besides the others: its messages end dead."""
        return f"{app}.audit"

    @property
    def topics(self) -> list[str]:
        return [t for app in self.producers
                for t in (self.topic(app), self.ordered_topic(app), self.audit_topic(app))]

    @property
    def names(self) -> list[str]:
        return [*self.producers, *(c.name for c in self.consumers)]

    def subscriptions(self) -> dict[str, frozenset[str]]:
        """Topic -> the consumer apps reading it: a confirmed message's subscribers."""
        return {t: frozenset(c.name for c in self.consumers if t in c.topics)
                for t in self.topics}


@dataclass
class Stack:
    infra: Infra
    base: Path
    pg_proxy: FaultProxy
    kafka_proxy: FaultProxy
    callback_proxy: FaultProxy
    callbacks: CallbackServer
    serve: RmsProcess
    workers: list[RmsProcess]
    http: httpx.AsyncClient
    engine: AsyncEngine
    # ``rms serve`` processes answering beside ``serve`` (a rolling upgrade): requests go to
    # any of them, as behind a load balancer
    beside: list[RmsProcess] = field(default_factory=list)
    retiring: list[RmsProcess] = field(default_factory=list)  # stopping, out of the rotation

    @property
    def api(self) -> str:
        serving = [self.serve, *(p for p in self.beside if p.alive)]
        return f"http://127.0.0.1:{random.choice(serving).port}"

    @property
    def check_url(self) -> str:
        return f"http://127.0.0.1:{self.callback_proxy.port}/check"

    @property
    def proxies(self) -> dict[str, FaultProxy]:
        return {"pg": self.pg_proxy, "kafka": self.kafka_proxy, "callback": self.callback_proxy}

    @property
    def processes(self) -> list[RmsProcess]:
        return [self.serve, *self.workers]

    def of_kind(self, kind: str) -> list[RmsProcess]:
        return [p for p in self.workers if p.args[0] == kind]

    async def restart(self, process: RmsProcess) -> None:
        process.kill()
        process.start()
        await process.wait_ready(self.http)

    async def ensure_up(self) -> None:
        """Heal: every process running (resumed if paused) and answering."""
        for process in self.processes:
            process.signal(signal.SIGCONT)
            if not process.alive:
                process.start()
        await asyncio.gather(*(p.wait_ready(self.http) for p in self.processes))

    async def create_apps(self, tag: str) -> Apps:
        producers = {}
        for prefix in ("orders", "billing"):
            name = f"{prefix}-{tag}"
            producers[name], _ = await self._create_app(name, [f"{name}.*"], [],
                                                        [self.check_url.removesuffix("check")],
                                                        [f"{name}.ordered"])
        apps = Apps(producers, [])
        for prefix, (suffix, crash, acks) in CONSUMERS.items():
            name, consumed = f"{prefix}-{tag}", [f"{p}.{suffix}" for p in producers]
            key, secret = await self._create_app(name, [], consumed, [])
            topics = tuple(t for t in apps.topics if any(fnmatchcase(t, g) for g in consumed))
            apps.consumers.append(ConsumerApp(name, key, secret, topics, crash, acks))
        await self.create_ordered_topics(apps)
        return apps

    async def create_ordered_topics(self, apps: Apps) -> None:
        """The ordered topics with several partitions (the others are created on first use
        with one): keys spread over them, each key on one."""
        topics = [apps.ordered_topic(app) for app in apps.producers]
        replicas = min(3, len(self.infra.kafka.nodes))
        results = await create_topics({"bootstrap_servers": self.infra.bootstrap_servers}, topics,
                                      partitions=ORDERED_PARTITIONS,
                                      replication_factor=replicas)
        failed = [r for r in results if r.outcome not in {"created", "exists"}]
        assert not failed, failed

    async def _create_app(self, name: str, produce: list[str], consume: list[str],
                          prefixes: list[str], ordered: list[str] | None = None
                          ) -> tuple[str, str]:
        body = {"name": name, "produce_topics": produce or ["none"],
                "consume_topics": consume or ["none"], "check_url_prefixes": prefixes,
                "ordered_topics": ordered or []}
        response = await self.http.post(f"{self.api}/v1/admin/apps", json=body,
                                        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert response.status_code == 201, response.text
        return str(response.json()["api_key"]), str(response.json()["signing_secret"])

    # ---- the database, read directly (not through the proxy) ------------------------------

    async def rows(self, sql: str, **params: Any) -> list[Any]:
        return await bounded(self._rows(sql, params), QUERY_SECONDS,
                             f"the harness's query {sql[:60]!r}")

    async def _rows(self, sql: str, params: dict[str, Any]) -> list[Any]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(text(sql), params)).all())

    async def unsettled(self, apps: Sequence[str]) -> int:
        rows = await self.rows("SELECT count(*) FROM messages WHERE app = ANY(:apps) AND "
                               "state IN ('pending-send', 'sent') AND NOT dead", apps=list(apps))
        return int(rows[0][0])

    async def claims_of(self, process: RmsProcess) -> int:
        rows = await self.rows("SELECT count(*) FROM messages WHERE claim_token LIKE :p",
                               p=f"%:{process.pid}:%")
        return int(rows[0][0])

    async def claims(self, ids: Sequence[str] | None = None) -> dict[str, Claim]:
        """The claimed messages now (``ids`` None), or the rows of ``ids`` whatever their
        claim."""
        where = "claim_token IS NOT NULL" if ids is None else "message_id = ANY(:ids)"
        rows = await self.rows(f"SELECT message_id, claim_token, delivery_count, check_count "
                               f"FROM messages WHERE {where}", ids=list(ids or []))
        return {row[0]: Claim(*row) for row in rows}

    async def events_of(self, ids: Sequence[str]) -> list[StoredEvent]:
        rows = await self.rows(
            "SELECT message_id, event, actor, detail, id, extract(epoch FROM at) "
            "FROM message_events WHERE message_id = ANY(:ids) ORDER BY id", ids=list(ids))
        return [StoredEvent(row[0], row[1], row[2], row[3], row[4], float(row[5]))
                for row in rows]

    async def final_messages(self, apps: Sequence[str]) -> dict[str, FinalMessage]:
        rows = await self.rows(
            "SELECT message_id, app, topic, state, dead, dead_reason, max_deliveries, "
            "delivery_count, extract(epoch FROM now() - CASE state "
            "WHEN 'pending-send' THEN next_check_at WHEN 'sent' THEN next_delivery_at END), "
            "key, ordered, confirm_seq, extract(epoch FROM deliver_after), transaction_id, "
            f"subscribers, {ACK_TIMES} FROM messages WHERE app = ANY(:apps)", apps=list(apps))
        return {row[0]: _final(row) for row in rows}

    async def final_events(self, apps: Sequence[str]) -> list[StoredEvent]:
        rows = await self.rows(
            "SELECT e.message_id, e.event, e.actor, e.detail, e.id, extract(epoch FROM e.at) "
            "FROM message_events e JOIN messages m USING (message_id) "
            "WHERE m.app = ANY(:apps) ORDER BY e.id", apps=list(apps))
        return [StoredEvent(row[0], row[1], row[2], row[3], row[4], float(row[5]))
                for row in rows]

    async def terminate_backends(self) -> int:
        """``pg_terminate_backend`` on every connection of the RMS processes."""
        rows = await self.rows("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE application_name = 'rms' AND pid <> pg_backend_pid()")
        return int(rows[0][0])


# a message's acks as {consumer: epoch seconds}
ACK_TIMES = ("(SELECT jsonb_object_agg(a.consumer, extract(epoch FROM (a.ack->>'at')::timestamptz))"
             " FROM jsonb_each(acks) AS a(consumer, ack))")


def _final(row: Any) -> FinalMessage:
    return FinalMessage(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
                        None if row[8] is None else float(row[8]), row[9], row[10], row[11],
                        None if row[12] is None else float(row[12]), row[13],
                        subscribers=None if row[14] is None else tuple(row[14]),
                        acks={str(k): float(v) for k, v in (row[15] or {}).items()})


def rms_env(infra: Infra, pg_proxy: FaultProxy) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMS_")}
    url = infra.rms_database_url(pg_proxy)
    return env | SETTINGS | {"RMS_DATABASE_URL": url, "RMS_ADMIN_TOKEN": ADMIN_TOKEN,
                             "RMS_KAFKA_BOOTSTRAP_SERVERS": infra.bootstrap_servers}


def _processes(base: Path, env: dict[str, str], workers: int, command: tuple[str, ...],
               metrics: bool) -> tuple[RmsProcess, list[RmsProcess]]:
    port = free_port()
    serve = RmsProcess("serve", ["serve", "--port", str(port)], env, base / "serve.log", port,
                       command)
    spawned = [RmsProcess(f"{kind}-{n}", [kind, *_metrics_port(metrics)], env,
                          base / f"{kind}-{n}.log", None, command)
               for kind in ("confirm-worker", "recovery-worker") for n in range(workers)]
    return serve, spawned


def _metrics_port(metrics: bool) -> list[str]:
    return ["--metrics-port", str(free_port())] if metrics else []


def metrics_address(process: RmsProcess) -> str:
    """Where Prometheus scrapes ``process``: the API's port, a worker's ``--metrics-port``."""
    port = process.port or int(process.args[process.args.index("--metrics-port") + 1])
    return f"127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def running_stack(infra: Infra, workers: int = 2, command: tuple[str, ...] = THIS_RELEASE,
                        *, metrics: bool = False, settings: dict[str, str] | None = None
                        ) -> AsyncIterator[Stack]:
    """Proxies, a callback server and the RMS processes (started by ``command``), all
    stopped at the end (``metrics``: the workers serve /metrics too; ``settings``: RMS
    settings beyond ``SETTINGS``)."""
    base = infra.base / f"stack-{uuid.uuid4().hex[:6]}"
    base.mkdir()
    pg_proxy = FaultProxy(upstream_port=infra.pg_port, seed=1)
    proxy_port, node_port = infra.proxied_node_ports
    kafka_proxy = FaultProxy(upstream_port=node_port, port=proxy_port, seed=3)
    callbacks = CallbackServer()
    callback_proxy = FaultProxy(upstream_port=callbacks.port, seed=2)
    serve, spawned = _processes(base, rms_env(infra, pg_proxy) | (settings or {}), workers,
                                command, metrics)
    engine = create_async_engine(infra.database_url(DATABASE), pool_pre_ping=True,
                                 connect_args={"server_settings": {"application_name": HARNESS}})
    async with serving(callbacks, port=callbacks.port), httpx.AsyncClient() as http:
        for proxy in (pg_proxy, kafka_proxy, callback_proxy):
            await proxy.start()
        stack = Stack(infra, base, pg_proxy, kafka_proxy, callback_proxy, callbacks, serve,
                      spawned, http, engine)
        try:
            for process in stack.processes:
                process.start()
            await stack.ensure_up()
            yield stack
        finally:
            callbacks.closing.set()
            every = [*stack.processes, *stack.beside, *stack.retiring]
            for process in every:
                process.terminate()
            deadline = time.monotonic() + STOP_SECONDS
            for process in every:
                await process.stop(deadline)
            for proxy in (pg_proxy, kafka_proxy, callback_proxy):
                await bounded(proxy.stop(), CLOSE_SECONDS, f"stopping the proxy {proxy.address}")
            await bounded(engine.dispose(), CLOSE_SECONDS, "closing the harness's connections")
