"""One scenario: concurrent load, faults every few seconds, heal, wait for liveness (bounded),
then the checker over the recorded history and the database's final state."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from tests.system.faults.bounds import bounded
from tests.system.faults.checker import check, notes, summary
from tests.system.faults.cluster import DATABASE, SETTINGS, Stack
from tests.system.faults.faults import Fault, FaultContext, bound_of, heal
from tests.system.faults.history import OPEN, Failover, Final, History, Op, Violation
from tests.system.faults.load import FINISH_SECONDS, PLANS, Consumers, Load, Mix, check_back
from tests.system.faults.proxy import Toxics
from tests.system.faults.retention import FINISH_SECONDS as RETENTION_FINISH_SECONDS
from tests.system.faults.retention import RUN_SECONDS, Retention, read_archive

LIVENESS_SECONDS = 90.0  # after healing: retry budgets (check-backs, deliveries) fit in it
# bounds of the scenario's steps (tests.system.faults.bounds): past one, the scenario fails as a Stall
HEAL_SECONDS = 300.0  # every broker node restarted, the database healed, every process up
SETUP_SECONDS = 120.0
ARCHIVE_READ_SECONDS = 120.0


@dataclass
class Scenario:
    name: str
    faults: Sequence[Fault]
    seconds: float = 12.0
    clients: int = 6
    gap: tuple[float, float] = (1.0, 2.5)  # seconds between two injections
    # injections the scenario must make under load: the load runs on past ``seconds`` until
    # they are done (a fault that takes long, like a failover, must not crowd out the next)
    at_least: int = 0
    # operations and features the load must have made before it stops: its stop is pushed
    # back until each was seen (at most to ``3 * seconds``), so a slow machine still makes them
    must_see: tuple[str, ...] = ()
    plans: dict[str, int] = field(default_factory=lambda: dict(PLANS))
    mix: Mix = field(default_factory=Mix)  # transactions, ordered and delayed messages
    retention: bool = False  # retention runs (some killed) during the load, one at the end
    contrast: bool = False  # asynchronous replication: violations are the measured contrast
    # latency kept during the load, by proxy ("pg", "kafka", "callback"): claims are held
    # longer, so worker faults catch workers holding them
    background: dict[str, Toxics] = field(default_factory=dict)


@dataclass(frozen=True)
class FailoverReport:
    """One loss of the primary, measured (seconds from the kill or the switchover request)."""

    kind: str
    old: str
    new: str
    promoted: float | None  # Patroni promoted the new primary
    first_prepare: float | None  # the first prepare sent after it answered 2xx
    rejoined: float | None  # the old primary streams as a standby again
    claims: int  # claims committed before, found on the new primary
    check_backs_after: int  # the check-back loop resumed: answers after the promotion
    records_after: int  # redelivery / publishing resumed: records read after the promotion
    lost_window: float | None = None  # contrast: first lost 2xx answer, seconds before the kill
    lost_answers: int = 0  # contrast: 2xx answers this failover lost
    carried: int = 0  # claims found on the new primary with the same token

    def __str__(self) -> str:
        def s(value: float | None) -> str:
            return "never" if value is None else f"{value:.1f}s"

        text = (f"{self.kind} {self.old} -> {self.new}: promoted {s(self.promoted)}, first "
                f"prepare answered {s(self.first_prepare)}, old primary rejoined "
                f"{s(self.rejoined)} after; {self.carried} of {self.claims} claims still held "
                f"there; after the "
                f"promotion {self.check_backs_after} check-backs, {self.records_after} records")
        if self.lost_window is not None:
            text += (f"; {self.lost_answers} answered requests lost, answered up to "
                     f"{self.lost_window:.3f}s before the kill")
        return text


def failover_report(failover: Failover, history: History,
                    lost: list[Violation] | None = None, since_last: float = 0.0
                    ) -> FailoverReport:
    """``lost``: the contrast's loss violations; those whose answer came after ``since_last``
    (the failover before) and before this one are this failover's loss window."""
    start = failover.killed_at

    def since(at: float | None) -> float | None:
        return None if at is None else at - start

    prepares = [op.answered for op in history.ops if op.kind in {"prepare", "txn-prepare"}
                and op.ok and op.at >= start and op.answered is not None]
    promoted = failover.promoted_at or start
    lost_ids = {v.message_id for v in lost or [] if " answered 2" in v.detail}
    lost_at = [op.answered for op in history.ops if op.ok and op.answered is not None
               and since_last < op.answered <= start
               and lost_ids.intersection(_members(op, history))]
    return FailoverReport(
        failover.kind, failover.old, failover.new, since(failover.promoted_at),
        since(min(prepares, default=None)), since(failover.rejoined_at),
        len(failover.before),
        sum(1 for a in history.answers if a.at >= promoted),
        sum(1 for r in history.consumed if r.at >= promoted),
        start - min(lost_at) if lost_at else (0.0 if lost is not None else None),
        len(lost_at), sum(1 for c in failover.before
                          if (held := failover.after.get(c.message_id)) and held.token == c.token))


def _members(op: Op, history: History) -> tuple[str, ...]:
    return history.transactions.get(op.message_id, (op.message_id,))


@dataclass
class Report:
    name: str
    ops: Counter[str]
    faults: Counter[str]
    violations: list[Violation]
    messages: int
    states: Counter[str]
    stale_writes: int
    heal_seconds: float
    open_check_outcomes: Counter[str]  # how transactions ended that check-back found open
    unanswered: Counter[str]  # requests that got no answer, by kind
    server_errors: Counter[str]  # 500 answers by kind (an outage must answer 503)
    notes: list[str] = field(default_factory=list)  # reported, not violations (held keys)
    failovers: list[FailoverReport] = field(default_factory=list)
    # asynchronous replication: what a failover lost, shown as the documented contrast
    contrast: list[Violation] = field(default_factory=list)

    def describe(self, limit: int = 25) -> str:
        lines = [f"scenario {self.name}: {self.messages} messages {dict(self.states)}",
                 f"  operations {dict(self.ops)}; unanswered {dict(self.unanswered)}; "
                 f"500 answers {dict(self.server_errors)}",
                 f"  faults {dict(self.faults)}",
                 f"  check answers that found the claim lost or the message changed (stale, "
                 f"written as history only): {self.stale_writes}; settled "
                 f"{self.heal_seconds:.1f}s after healing",
                 f"  violations {len(self.violations)}"]
        lines += [f"    {v}" for v in self.violations[:limit]]
        lines += [f"  note: {n}" for n in self.notes[:limit]]
        lines += [f"  failover: {f}" for f in self.failovers]
        if self.contrast:
            lines.append(f"  asynchronous replication (documented loss window, not counted): "
                         f"{len(self.contrast)} {summary(self.contrast)}")
            lines += [f"    {v}" for v in self.contrast[:limit]]
        return "\n".join(lines)


def _unseen(ctx: FaultContext, scenario: Scenario, latest: float) -> bool:
    """Some of the scenario's ``must_see`` not made yet, and still time to make them."""
    if time.monotonic() >= latest:
        return False
    counts = ctx.load.history.counts()
    return any(not counts[kind] for kind in scenario.must_see)


async def inject_until(ctx: FaultContext, scenario: Scenario) -> None:
    """Inject a random fault every ``gap`` seconds until the load stops; while fewer than
    ``at_least`` were injected, or some of ``must_see`` was not made, the load's stop is pushed
    back past the next one."""
    load, faults, at_least = ctx.load, scenario.faults, scenario.at_least
    latest = time.monotonic() + 3 * scenario.seconds
    if not faults:
        while _unseen(ctx, scenario, latest):
            load.stop_at = max(load.stop_at, time.monotonic() + 1.0)
            await asyncio.sleep(0.5)
        await asyncio.sleep(max(0.0, load.stop_at - time.monotonic()))
        return
    injected = 0
    while True:
        pause = ctx.rng.uniform(*scenario.gap)
        if injected < at_least or _unseen(ctx, scenario, latest):
            load.stop_at = max(load.stop_at, time.monotonic() + pause + 1.0)
        await asyncio.sleep(pause)
        if time.monotonic() >= load.stop_at:
            return
        fault = ctx.rng.choice(list(faults))
        await bounded(fault.inject(ctx), bound_of(fault),
                      f"injecting {fault.name}")
        injected += 1


async def settle(stack: Stack, apps: list[str], timeout: float) -> float:
    """Wait until every message of ``apps`` is settled (or ``timeout``); returns the wait."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not await stack.unsettled(apps):  # a query: bounded in Stack.rows
            break
        await asyncio.sleep(0.25)
    return time.monotonic() - started


async def run(stack: Stack, scenario: Scenario, seed: int) -> Report:
    rng = random.Random(seed)
    apps = await bounded(stack.create_apps(uuid.uuid4().hex[:8]), SETUP_SECONDS,
                         "creating the scenario's apps and ordered topics")
    history = History(consumers={c.name for c in apps.consumers},
                      subscriptions=apps.subscriptions(),
                      silent={c.name for c in apps.consumers if not c.acks})
    stack.callbacks.behaviour = check_back(history)
    consumer = Consumers.of(stack, apps, history, random.Random(rng.random()),
                            SETTINGS["RMS_ACK_TOPIC"])
    load = Load(stack, apps, history, random.Random(rng.random()), scenario.clients,
                plans=scenario.plans, mix=scenario.mix)
    retention = Retention(stack, history, random.Random(rng.random()),
                          stack.infra.database_url(DATABASE))
    ctx = FaultContext(stack, load, consumer, rng, Counter())
    for name, toxics in scenario.background.items():
        stack.proxies[name].toxics = toxics
    consumer.start()
    load.start(scenario.seconds)
    retaining = asyncio.create_task(retention.loop(lambda: load.stop_at) if scenario.retention
                                    else asyncio.sleep(0))
    try:
        try:
            await inject_until(ctx, scenario)
        finally:
            await bounded(heal(ctx), HEAL_SECONDS, "healing after the faults")
        await bounded(load.finish(), FINISH_SECONDS, "the producers' last messages")
        await bounded(retaining, RUN_SECONDS + 30.0, "the retention runs during the load")
        waited = await settle(stack, apps.names, LIVENESS_SECONDS)
    finally:
        # no ack may be sent or answered after the snapshot: an answer the snapshot cannot
        # reflect would read as a lost write (and a failed scenario leaves no client running)
        await load.cancel()
        retaining.cancel()
        await bounded(consumer.stop(), Consumers.STOP_SECONDS + 30.0,
                      "stopping the test consumers")
    if scenario.retention:
        await asyncio.sleep(2.5)  # past OLDER_THAN: the last finished messages go too
        await bounded(retention.finish(), RETENTION_FINISH_SECONDS,
                      "the final retention runs")
    final = await _final(stack, apps.names, scenario.retention)
    merged = final.merged()
    violations = check(history, final)
    contrast = violations if scenario.contrast else []
    violations = [] if scenario.contrast else violations
    lost = [v for v in contrast if v.kind == "loss"] if scenario.contrast else None
    return Report(scenario.name, history.counts(), ctx.injected + _proxy_faults(stack),
                  violations, len(merged.messages),
                  Counter(m.state + ("/dead" if m.dead else "") + ("/archived" if m.archived
                                                                  else "")
                          for m in merged.messages.values()),
                  sum(1 for e in merged.events if e.detail.get("stale")), waited,
                  _open_outcomes(history),
                  Counter(op.kind for op in history.ops if op.status is None
                          and op.kind != "ack-topic"),
                  Counter(op.kind for op in history.ops if op.status == 500),
                  notes(history, final),
                  _failover_reports(history, lost), contrast)


def _failover_reports(history: History, lost: list[Violation] | None) -> list[FailoverReport]:
    reports, last = [], 0.0
    for failover in history.failovers:
        reports.append(failover_report(failover, history, lost, last))
        last = failover.killed_at
    return reports


async def _final(stack: Stack, apps: list[str], archived: bool) -> Final:
    final = Final(await stack.final_messages(apps), await stack.final_events(apps))
    if archived:
        final.archived, final.archived_events = await bounded(
            asyncio.to_thread(read_archive, stack.infra.base / "archive", apps),
            ARCHIVE_READ_SECONDS, "reading the retention archive")
    return final


def _open_outcomes(history: History) -> Counter[str]:
    found_open = {a.message_id for a in history.answers if a.status == OPEN}
    return Counter(history.truth[m] for m in found_open)


def _proxy_faults(stack: Stack) -> Counter[str]:
    found: Counter[str] = Counter()
    for label, proxy in stack.proxies.items():
        for kind, n in proxy.injected.items():
            found[f"{label}-proxy-{kind}"] += n
        proxy.injected.clear()
    return found
