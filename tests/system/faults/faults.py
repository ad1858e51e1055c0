"""The faults. Each ``inject`` makes one fault happen and, for faults that are an
outage (a killed process, a stopped database), ends it again before returning, so between two
injections the system is whole; ``heal`` undoes whatever a fault may have left behind (a
cancelled injection, proxy toxics)."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.exc import SQLAlchemyError

from tests.system.faults.cluster import (
    BROKER_SESSION_MS,
    LEASE_SECONDS,
    TRANSACTION_TIMEOUT_SECONDS,
    RmsProcess,
    Stack,
)
from tests.system.faults.disk import SizedDisk
from tests.system.faults.ha import TTL, HaError, PatroniCluster
from tests.system.faults.history import Failover
from tests.system.faults.load import Consumers, Load
from tests.system.faults.proxy import Toxics

CLAIM_HUNT_SECONDS = 15.0
INJECT_SECONDS = 180.0  # one injection's bound, unless its fault names a longer ``bound``


@dataclass
class FaultContext:
    stack: Stack
    load: Load
    consumer: Consumers
    rng: random.Random
    injected: Counter[str]


class Fault(Protocol):
    @property
    def name(self) -> str: ...

    async def inject(self, ctx: FaultContext) -> None: ...


@dataclass
class KillServe:
    """kill -9 of ``rms serve`` under load: requests whose transaction committed lose their
    answer; producers retry with the same id once it is back."""

    name: str = "serve-kill"

    async def inject(self, ctx: FaultContext) -> None:
        serve = ctx.stack.serve
        for _ in range(100):  # with requests in flight (some have committed, unanswered)
            if ctx.load.flight["requests"] >= 2:
                break
            await asyncio.sleep(0.02)
        serve.kill()
        ctx.injected[self.name] += 1
        await asyncio.sleep(ctx.rng.uniform(0.2, 1.0))
        serve.start()
        await serve.wait_ready(ctx.stack.http)


@dataclass
class KillProducer:
    """kill -9 of the producer between prepare and confirm (see tests.system.faults.load)."""

    name: str = "producer-kill"

    async def inject(self, ctx: FaultContext) -> None:
        killed = await ctx.load.kill_producers()
        ctx.injected[self.name] += 1 if killed else 0


async def hold_claims(ctx: FaultContext, worker: RmsProcess, hunt: float) -> bool:
    """SIGSTOP ``worker`` at a moment it holds claims (True) or, after ``hunt`` seconds, any
    moment (False). The worker is left stopped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + hunt
    while True:
        worker.signal(signal.SIGSTOP)
        await asyncio.sleep(0.2)  # writes it already sent land first
        if await ctx.stack.claims_of(worker):
            return True
        if loop.time() > deadline:
            return False
        worker.signal(signal.SIGCONT)
        await asyncio.sleep(ctx.rng.uniform(0.01, 0.15))


@dataclass
class KillWorker:
    """kill -9 of a worker while it holds claims; its claims come back after the lease."""

    kind: str
    hunt: float = CLAIM_HUNT_SECONDS

    @property
    def name(self) -> str:
        return f"{self.kind}-kill"

    async def inject(self, ctx: FaultContext) -> None:
        worker = ctx.rng.choice(ctx.stack.of_kind(self.kind))
        held = await hold_claims(ctx, worker, self.hunt)
        worker.kill()
        ctx.injected[self.name + ("" if held else "-idle")] += 1
        await ctx.stack.restart(worker)


@dataclass
class PauseWorker:
    """SIGSTOP a worker holding claims until its lease passed, then SIGCONT: its late writes
    must change nothing (another worker owns those messages now)."""

    kind: str
    hunt: float = CLAIM_HUNT_SECONDS

    @property
    def name(self) -> str:
        return f"{self.kind}-pause"

    async def inject(self, ctx: FaultContext) -> None:
        worker = ctx.rng.choice(ctx.stack.of_kind(self.kind))
        held = await hold_claims(ctx, worker, self.hunt)
        ctx.injected[self.name + ("" if held else "-idle")] += 1
        await asyncio.sleep(LEASE_SECONDS + ctx.rng.uniform(0.5, 1.5))
        worker.signal(signal.SIGCONT)


@dataclass
class LoseBrokerLog:
    """The single broker killed for several seconds, then back with its log directory gone:
    no topic, record or offset survives; redelivery has to repair what was lost."""

    name: str = "broker-lost-log"
    down: tuple[float, float] = (3.0, 6.0)

    async def inject(self, ctx: FaultContext) -> None:
        infra = ctx.stack.infra
        infra.kafka.kill_node(1)
        ctx.injected[self.name] += 1
        ctx.load.history.log_lost = True
        await asyncio.sleep(ctx.rng.uniform(*self.down))
        await asyncio.to_thread(infra.lose_broker_log)
        await ctx.consumer.restart()


async def publishing_leader(ctx: FaultContext) -> int:
    """The node leading partition 0 of a topic RMS is publishing to (any node if unknown)."""
    apps = ctx.load.apps
    topic = apps.topic(ctx.rng.choice(list(apps.producers)))
    leader = await asyncio.to_thread(ctx.stack.infra.kafka.leader, topic)
    return leader or ctx.rng.choice([n.node_id for n in ctx.stack.infra.kafka.nodes])


@dataclass
class KillLeader:
    """kill -9 of the broker leading a partition RMS is publishing to; a follower in sync takes
    over; the node comes back with its data a few seconds later and catches up."""

    name: str = "broker-leader-kill"
    down: tuple[float, float] = (2.0, 5.0)

    async def inject(self, ctx: FaultContext) -> None:
        kafka = ctx.stack.infra.kafka
        node = await publishing_leader(ctx)
        kafka.kill_node(node)
        ctx.injected[self.name] += 1
        await asyncio.sleep(ctx.rng.uniform(*self.down))
        await asyncio.to_thread(kafka.restart_node, node)


@dataclass
class PauseBroker:
    """SIGSTOP of a broker past its session timeout (the quorum fences it, its partitions move
    and shrink their in-sync replicas), then SIGCONT: it rejoins and catches up. The pause is
    longer than the stack's Kafka transaction time-out: a transaction the broker held open (as
    its coordinator or a partition's leader) is aborted by the broker, and read_committed
    consumers must still never see a strict prefix of an atomic publish."""

    name: str = "broker-pause"

    async def inject(self, ctx: FaultContext) -> None:
        kafka = ctx.stack.infra.kafka
        node = await publishing_leader(ctx)
        kafka.pause_node(node)
        ctx.injected[self.name] += 1
        await asyncio.sleep(max(BROKER_SESSION_MS / 1000, TRANSACTION_TIMEOUT_SECONDS)
                            + ctx.rng.uniform(1.0, 3.0))
        kafka.resume_node(node)
        await asyncio.to_thread(kafka.wait_ready, 60.0)


@dataclass
class RollingRestart:
    """Every broker in turn stopped (controlled shutdown) and started again with its data, the
    way an operator upgrades a cluster."""

    name: str = "broker-rolling-restart"
    bound: float = 3 * (30.0 + 60.0) + 30.0  # each node: stopped, then ready again

    async def inject(self, ctx: FaultContext) -> None:
        kafka = ctx.stack.infra.kafka
        ctx.injected[self.name] += 1
        for node in kafka.nodes:
            await asyncio.to_thread(kafka.stop_node, node.node_id, 30.0)
            await asyncio.to_thread(kafka.restart_node, node.node_id)


@dataclass
class RestartPostgres:
    """``pg_ctl stop -m immediate`` (a crash), then start again on the same port."""

    name: str = "postgres-crash"

    async def inject(self, ctx: FaultContext) -> None:
        postgres = ctx.stack.infra.postgres
        await asyncio.to_thread(postgres.stop, "immediate")
        ctx.injected[self.name] += 1
        await asyncio.sleep(ctx.rng.uniform(0.5, 2.0))
        await asyncio.to_thread(postgres.start)


async def hold_full(ctx: FaultContext, disk: SizedDisk | None, name: str,
                    full: tuple[float, float]) -> None:
    """``disk`` filled to its last byte for a while, then freed."""
    assert disk is not None, f"{name} needs its Infra's disk on a tmpfs (Infra(..._disk_mb=))"
    await asyncio.to_thread(disk.fill)
    ctx.injected[name] += 1
    await asyncio.sleep(ctx.rng.uniform(*full))
    await asyncio.to_thread(disk.free)


@dataclass
class FillPostgresDisk:
    """PostgreSQL's data directory (a size-limited tmpfs) filled to the last byte under load
    for a few seconds, then freed: writes are refused with 503 (``database-full``), nothing
    is half-written, and service resumes without restarting RMS. Should PostgreSQL stop
    (a WAL segment it could not create), it is started again and counted."""

    name: str = "pg-disk-full"
    full: tuple[float, float] = (3.0, 5.0)

    async def inject(self, ctx: FaultContext) -> None:
        infra = ctx.stack.infra
        await hold_full(ctx, infra.pg_disk, self.name, self.full)
        if not (infra.postgres.data_dir / "postmaster.pid").exists():
            ctx.injected["pg-stopped-by-full-disk"] += 1
            await asyncio.to_thread(infra.heal_postgres)


@dataclass
class FillKafkaDisk:
    """The single broker's log directory (a size-limited tmpfs) filled to the last byte under
    load: the broker fails its log directory and stops. Confirmed messages stay ``sent`` and
    are published once the space is freed and the broker started again (with its log)."""

    name: str = "kafka-disk-full"
    full: tuple[float, float] = (3.0, 5.0)

    async def inject(self, ctx: FaultContext) -> None:
        infra = ctx.stack.infra
        await hold_full(ctx, infra.kafka_disk, self.name, self.full)
        if await asyncio.to_thread(infra.heal_kafka):
            ctx.injected["broker-stopped-by-full-disk"] += 1
            await ctx.consumer.restart()


@dataclass
class TerminateBackends:
    """``pg_terminate_backend`` on every connection the RMS processes hold."""

    name: str = "pg-terminate-backend"

    async def inject(self, ctx: FaultContext) -> None:
        ctx.injected[self.name] += 1
        ctx.injected["backends-terminated"] += await ctx.stack.terminate_backends()


@dataclass
class ProxyChaos:
    """Latency, dropped and reset connections between RMS and PostgreSQL, Kafka and the
    producers' check-back endpoint, for a few seconds; then every live PostgreSQL and Kafka
    connection reset at once."""

    name: str = "proxy-chaos"

    async def inject(self, ctx: FaultContext) -> None:
        stack, rng = ctx.stack, ctx.rng
        stack.pg_proxy.toxics = Toxics(latency=rng.uniform(0, 0.02), jitter=0.05,
                                       drop=rng.uniform(0, 0.01), reset=rng.uniform(0, 0.01))
        stack.callback_proxy.toxics = Toxics(latency=rng.uniform(0, 0.3), jitter=0.5,
                                             drop=rng.uniform(0, 0.2), reset=rng.uniform(0, 0.2))
        stack.kafka_proxy.toxics = Toxics(latency=rng.uniform(0, 0.02), jitter=0.05,
                                          drop=rng.uniform(0, 0.005), reset=rng.uniform(0, 0.005))
        ctx.injected[self.name] += 1
        await asyncio.sleep(rng.uniform(1.0, 3.0))
        stack.pg_proxy.reset_all()
        stack.kafka_proxy.reset_all()
        heal_proxies(stack)


# ---- a PostgreSQL that fails over (Patroni) -----------------------------------------------

PROMOTION_SECONDS = 90.0  # bounded waits for a new primary and for the old one to rejoin


def _cluster(ctx: FaultContext) -> PatroniCluster:
    cluster = ctx.stack.infra.ha
    assert cluster is not None, "a failover fault needs Infra(ha=PatroniCluster(...))"
    return cluster


async def _in_flight(ctx: FaultContext) -> None:
    for _ in range(100):  # with requests in flight, as for a serve kill
        if ctx.load.flight["requests"] >= 2:
            return
        await asyncio.sleep(0.02)


async def _claims_after(ctx: FaultContext, failover: Failover) -> None:
    """The rows claimed before, read on the new primary as soon as it answers."""
    ids = [c.message_id for c in failover.before]
    deadline = time.monotonic() + PROMOTION_SECONDS
    while True:
        try:
            failover.after = await ctx.stack.claims(ids)
            return
        except (OSError, SQLAlchemyError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@dataclass
class LosePrimary:
    """The primary lost under load, Patroni promotes the standby in sync, the old primary
    rejoins as a standby: ``how`` is ``kill`` (SIGKILL of its PostgreSQL, Patroni fails over
    at once), ``node`` (Patroni and PostgreSQL killed: the leader key expires after its TTL,
    then the member starts again) or ``switchover`` (planned, through Patroni's REST API)."""

    how: str = "kill"
    # the primary found, a new one promoted, the claims read there, the old one rejoined
    bound: float = 4 * PROMOTION_SECONDS + TTL + 60.0

    @property
    def name(self) -> str:
        return {"kill": "pg-primary-kill", "node": "pg-node-kill",
                "switchover": "pg-switchover"}[self.how]

    async def inject(self, ctx: FaultContext) -> None:
        cluster = _cluster(ctx)
        old = await asyncio.to_thread(cluster.wait_primary, PROMOTION_SECONDS)
        await _in_flight(ctx)
        before = list((await ctx.stack.claims()).values())
        events = await ctx.stack.events_of([c.message_id for c in before])
        failover = Failover(self.name, old.name, time.monotonic(), before=before, events=events)
        ctx.load.history.failovers.append(failover)
        ctx.injected[self.name] += 1
        if self.how == "switchover":
            new = await asyncio.to_thread(cluster.switchover)
        else:
            killed = None
            if self.how == "node":
                await asyncio.to_thread(old.kill)
            elif (killed := await asyncio.to_thread(old.kill_postgres)) is None:
                raise HaError(f"{self.name}: no running PostgreSQL found on {old.name}")
            new = await asyncio.to_thread(cluster.wait_primary, PROMOTION_SECONDS + TTL,
                                          old.name, killed)
        failover.new, failover.promoted_at = new.name, time.monotonic()
        ctx.injected["pg-promotion"] += 1
        await _claims_after(ctx, failover)
        if self.how == "node":
            await asyncio.to_thread(cluster.heal)
        if await asyncio.to_thread(cluster.rejoined, PROMOTION_SECONDS):
            ctx.injected["pg-reinitialize"] += 1
        failover.rejoined_at = time.monotonic()
        ctx.injected["pg-rejoin"] += 1


@dataclass
class InTurn:
    """Its faults one after the other, round and round (a scenario that must see each)."""

    faults: list[Fault]
    turn: int = 0

    @property
    def name(self) -> str:
        return "+".join(f.name for f in self.faults)

    @property
    def bound(self) -> float:
        return max(bound_of(f) for f in self.faults)

    async def inject(self, ctx: FaultContext) -> None:
        fault = self.faults[self.turn % len(self.faults)]
        self.turn += 1
        await fault.inject(ctx)


def bound_of(fault: Fault) -> float:
    """How long one injection of ``fault`` may take (tests.system.faults.bounds)."""
    return float(getattr(fault, "bound", INJECT_SECONDS))


def failover_faults() -> list[Fault]:
    return [LosePrimary("kill"), LosePrimary("switchover"), LosePrimary("node")]


def heal_proxies(stack: Stack) -> None:
    for proxy in stack.proxies.values():
        proxy.heal()


async def heal(ctx: FaultContext) -> None:
    """Whatever an interrupted injection left: proxies clean, database and broker up, every
    RMS process running and answering."""
    heal_proxies(ctx.stack)
    infra = ctx.stack.infra
    await asyncio.to_thread(infra.heal_postgres)
    if await asyncio.to_thread(infra.heal_kafka):
        await ctx.consumer.restart()
    await ctx.stack.ensure_up()


def broker_faults(brokers: int) -> list[Fault]:
    """A cluster's node faults, or the lost log of a single broker."""
    if brokers == 1:
        return [LoseBrokerLog()]
    return [KillLeader(), PauseBroker(), RollingRestart()]


def every_fault(brokers: int, hunt: float = CLAIM_HUNT_SECONDS, *, failover: bool = False
                ) -> list[Fault]:
    """Every fault; with a failover cluster its primary's loss replaces the crash in place
    (and the PostgreSQL proxy, which RMS's multi-host URL bypasses, has nothing to break)."""
    postgres: list[Fault] = failover_faults() if failover else [RestartPostgres()]
    return [KillServe(), KillProducer(), KillWorker("confirm-worker", hunt),
            KillWorker("recovery-worker", hunt), PauseWorker("confirm-worker", hunt),
            PauseWorker("recovery-worker", hunt), *broker_faults(brokers), *postgres,
            TerminateBackends(), ProxyChaos()]
